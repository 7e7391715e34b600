import { isControlCode } from '@app/common/control-characters';

export const TEXT_OK = 0;
export const TEXT_TOO_LONG = 1;
/** PostgreSQL refuses NUL in text and jsonb, and unpaired surrogates in jsonb. */
export const TEXT_UNSTORABLE = 2;
export const TEXT_CONTROL = 3;

/**
 * One pass over a string: NUL or an unpaired surrogate (unstorable), a C0/C1 control character
 * or DEL (when `rejectControl`), and more than `max` code points. A plain char-code loop: on the
 * short strings events carry it is several times faster than regular expressions or
 * isWellFormed() plus indexOf().
 */
export function scanText(s: string, max: number, rejectControl: boolean): number {
  const n = s.length;
  // Each code point is at most two UTF-16 units.
  if (n > 2 * max) return TEXT_TOO_LONG;
  let points = n;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (isControlCode(c)) {
      if (c === 0) return TEXT_UNSTORABLE;
      if (rejectControl) return TEXT_CONTROL;
    } else if (c >= 0xd800 && c <= 0xdfff) {
      const d = i + 1 < n ? s.charCodeAt(i + 1) : 0;
      if (c > 0xdbff || d < 0xdc00 || d > 0xdfff) return TEXT_UNSTORABLE;
      i++;
      points--;
    }
  }
  return points > max ? TEXT_TOO_LONG : TEXT_OK;
}

/** A field name for an issue: long keys are cut at 128 characters. */
export function fieldName(prefix: string, key: string): string {
  return prefix + (key.length > 128 ? key.slice(0, 128) + '…' : key);
}

/**
 * Upper bound of the UTF-8 size of a JSON string: each UTF-16 unit serialises to at most 6 bytes
 * (a \uXXXX escape), plus the quotes.
 */
export function stringBound(s: string): number {
  return 6 * s.length + 2;
}

/** Upper bound of a known field's name, colon and comma. */
export const KNOWN_KEY_BOUND = 24;
/** Upper bound of a number or boolean value. */
export const SCALAR_BOUND = 24;
