// Node 24 ships JSON.rawJSON (TC39 "JSON.parse source text access"); TypeScript 5.9's lib does not declare it yet.
interface JSON {
  /** A value JSON.stringify writes as the given text, e.g. an int64 digit for digit. */
  rawJSON(text: string): unknown;
}
