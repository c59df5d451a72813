// Logger options: JSON lines at the configured level, with credentials kept out of every line.
import type { FastifyRequest, FastifyServerOptions } from 'fastify';

const ISSUED_TOKEN = /pst_[0-9A-Za-z]{20,}/g;
const SEPARATOR = /([&;])/;

/**
 * The URL as logs may show it: the value of every query parameter whose name spells
 * access_token (in any case, percent-encoded any number of times, `+` for a space) is replaced,
 * and so is anything shaped like an issued token, wherever it appears in the query.
 */
export function redactUrl(url: string): string {
  const start = url.indexOf('?');
  if (start === -1) return url;
  const query = url.slice(start + 1).split(SEPARATOR).map(redactParameter).join('');
  return `${url.slice(0, start + 1)}${query}`.replace(ISSUED_TOKEN, 'pst_[redacted]');
}

function redactParameter(parameter: string): string {
  const equals = parameter.indexOf('=');
  const name = equals === -1 ? parameter : parameter.slice(0, equals);
  return equals !== -1 && isAccessTokenName(name) ? `${name}=[redacted]` : parameter;
}

function isAccessTokenName(name: string): boolean {
  let decoded = name.replaceAll('+', ' ');
  for (let rounds = 0; rounds < 4 && decoded.includes('%'); rounds++) decoded = percentDecode(decoded);
  return decoded.trim().toLowerCase() === 'access_token';
}

// decodeURIComponent throws on a stray %; the logs must still be written.
function percentDecode(text: string): string {
  return text.replace(/%([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

export function loggerOptions(level: string, stream?: NodeJS.WritableStream): FastifyServerOptions['logger'] {
  return {
    level,
    redact: { paths: ['req.headers.authorization'], censor: '[redacted]' },
    serializers: {
      req: (request: FastifyRequest) => ({
        method: request.method,
        url: redactUrl(request.url),
        host: request.host,
        remoteAddress: request.ip,
      }),
    },
    ...(stream && { stream }),
  };
}
