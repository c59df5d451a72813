// The one rule for what logs and traces may show of a URL or a message: no token, however it is
// spelled or percent-encoded. logging.ts applies it to request lines, redacting-exporter.ts to spans.

const ISSUED_TOKEN = /pst_[0-9A-Za-z]{20,}/;
// A run of URL characters between delimiters (/ ? & ; = + and the like): a path segment, a name, a value.
const PIECE = /[\w%.~-]+/g;
// `?` too, so that in free text ("… /plants?access_token=…") and odd URLs no parameter hides behind one.
const SEPARATOR = /([&;?])/;
export const REDACTED = '[redacted]';

/**
 * The URL (or any text quoting one) as logs and traces may show it: the value of every query
 * parameter whose name spells access_token (in any case, percent-encoded any number of times, `+`
 * for a space) is replaced, and so is every piece, in the path or the query, that decodes to
 * something shaped like an issued token.
 */
export function redactUrl(url: string): string {
  const start = url.indexOf('?');
  return withoutIssuedTokens(start === -1 ? url : `${url.slice(0, start + 1)}${redactQuery(url.slice(start + 1))}`);
}

/** A query string without its leading `?` (OpenTelemetry's url.query), by the same rule. */
export function redactQueryString(query: string): string {
  return withoutIssuedTokens(redactQuery(query));
}

function redactQuery(query: string): string {
  return query.split(SEPARATOR).map(redactParameter).join('');
}

function redactParameter(parameter: string): string {
  const equals = parameter.indexOf('=');
  return equals !== -1 && isAccessTokenName(parameter.slice(0, equals)) ? `${parameter.slice(0, equals)}=${REDACTED}` : parameter;
}

function isAccessTokenName(name: string): boolean {
  return fullyDecoded(name.replaceAll('+', ' ')).trim().toLowerCase() === 'access_token';
}

function withoutIssuedTokens(text: string): string {
  // Most URLs have neither, and logging runs this on every request.
  if (!text.includes('pst_') && !text.includes('%')) return text;
  return text.replace(PIECE, (piece) => (ISSUED_TOKEN.test(fullyDecoded(piece)) ? REDACTED : piece));
}

function fullyDecoded(text: string): string {
  let decoded = text;
  for (let rounds = 0; rounds < 4 && decoded.includes('%'); rounds++) decoded = percentDecode(decoded);
  return decoded;
}

// decodeURIComponent throws on a stray %; the logs and spans must still be written.
function percentDecode(text: string): string {
  return text.replace(/%([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}
