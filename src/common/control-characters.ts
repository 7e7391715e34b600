/**
 * The one control-character rule of the API: C0 controls (U+0000–U+001F), DEL (U+007F) and C1
 * controls (U+0080–U+009F). Ingest never stores them in an event name or an identifier, and the
 * read filters on those fields refuse them, so every stored value can be filtered on.
 */
export function isControlCode(code: number): boolean {
  return code < 0x20 || (code >= 0x7f && code <= 0x9f);
}

// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;

/** The same rule as a JSON Schema `pattern`, for the OpenAPI document. */
export const NO_CONTROL_CHARACTERS_PATTERN = '^[^\\u0000-\\u001f\\u007f-\\u009f]*$';

export function hasControlCharacter(value: string): boolean {
  return CONTROL_CHARACTER.test(value);
}
