// The one rule for what logs and traces may show of a URL, a header or a message: no token, however
// it is spelled or percent-encoded. logging.ts applies it to log lines, redacting-exporter.ts to spans.

const ISSUED_TOKEN = /pst_[0-9A-Za-z]{20,}/;
// A run of URL characters between delimiters (/ ? & ; = + and the like): a path segment, a name, a value.
const PIECE = /[\w%.~-]+/g;
// Not `?`: within a query it is data, and a token may hold one.
const SEPARATOR = /([&;])/;
// The name may end a longer text ("… access_token=…"); `+` is a space to the query parser.
const ACCESS_TOKEN_NAME = /(?:^|[^0-9a-z_])access_token$/;
export const REDACTED = '[redacted]';

/**
 * The text as logs and traces may show it: the value of every parameter whose name spells
 * access_token (in any case, percent-encoded any number of times) is replaced, in a URL's query,
 * a path (`;access_token=`), a cookie or a message; and so is every piece, anywhere, that decodes
 * to something shaped like an issued token.
 */
export function redactTokens(text: string): string {
  // Most request URLs have no parameter, and logging runs this on every request.
  if (!text.includes('=')) return withoutIssuedTokens(text);
  const start = text.indexOf('?');
  const parameters = start === -1 ? redactParameters(text) : `${redactParameters(text.slice(0, start))}?${redactParameters(text.slice(start + 1))}`;
  return withoutIssuedTokens(parameters);
}

function redactParameters(text: string): string {
  return text.split(SEPARATOR).map(redactParameter).join('');
}

function redactParameter(parameter: string): string {
  const equals = parameter.indexOf('=');
  return equals !== -1 && isAccessTokenName(parameter.slice(0, equals)) ? `${parameter.slice(0, equals)}=${REDACTED}` : parameter;
}

function isAccessTokenName(name: string): boolean {
  return ACCESS_TOKEN_NAME.test(fullyDecoded(name.replaceAll('+', ' ')).trim().toLowerCase());
}

function withoutIssuedTokens(text: string): string {
  // Most URLs have neither.
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
