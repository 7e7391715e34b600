// Query strings as a client may really send them, for the fuzzing spec (TypeScript, loaded as
// CommonJS) and the robustness script (ESM). Types are in query-text.d.ts.
'use strict';

/** Percent-encodes the UTF-8 bytes of a value (a lone surrogate becomes U+FFFD, as in a browser). */
function percentEncode(v) {
  let out = '';
  for (const byte of Buffer.from(v, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-_.~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/**
 * Raw query fragments, sent as they are: broken percent-encoding, bytes that are not UTF-8 once
 * decoded, a NUL, a lone surrogate, a bare `+`, array syntax and an encoded `+` in a time zone.
 */
const RAW_QUERY_FRAGMENTS = Object.freeze([
  '%',
  '%zz',
  '%ff%fe',
  '%c3%28',
  '%00',
  '%ed%a0%80',
  'a%2',
  '%%',
  '+',
  '[]=1',
  '%2B01:00',
]);

module.exports = { percentEncode, RAW_QUERY_FRAGMENTS };
