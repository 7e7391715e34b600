import { createHash, createHmac, hash } from 'node:crypto';

export type PiiKind = 'email' | 'phone' | 'card';

// The scanners below are hand-written loops rather than regular expressions: they run on every
// payload string of every event, and an unanchored email or phone regex backtracks
// quadratically on hostile input. Each scan here is linear in the string length.

const Ch = {
  Space: 0x20,
  Plus: 0x2b,
  Minus: 0x2d,
  Dot: 0x2e,
  Zero: 0x30,
  Nine: 0x39,
  OpenParen: 0x28,
  CloseParen: 0x29,
} as const;

function isDigit(c: number): boolean {
  return c >= Ch.Zero && c <= Ch.Nine;
}

function isAlpha(c: number): boolean {
  return (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
}

function isAlnum(c: number): boolean {
  return isAlpha(c) || isDigit(c);
}

// RFC 5322 atext, minus the rarely used characters that mostly appear in non-address text.
function isLocalChar(c: number): boolean {
  return isAlnum(c) || c === Ch.Dot || c === Ch.Minus || c === Ch.Plus || c === 0x5f || c === 0x25;
}

function isDomainChar(c: number): boolean {
  return isAlnum(c) || c === Ch.Dot || c === Ch.Minus;
}

/**
 * Finds an email address around the `@` at `at`. Returns its [start, end) or null.
 * A domain needs at least two labels and an alphabetic top-level label of 2+ letters.
 */
function emailAt(s: string, at: number): [number, number] | null {
  let start = at;
  while (start > 0 && isLocalChar(s.charCodeAt(start - 1))) start--;
  if (start === at) return null;
  let end = at + 1;
  while (end < s.length && isDomainChar(s.charCodeAt(end))) end++;
  // A sentence may end right after the address.
  while (end > at + 1 && s.charCodeAt(end - 1) === Ch.Dot) end--;
  // Searched within the domain only: lastIndexOf would rescan the text before it for every '@'.
  let lastDot = end - 1;
  while (lastDot > at + 1 && s.charCodeAt(lastDot) !== Ch.Dot) lastDot--;
  if (lastDot <= at + 1) return null;
  const tldLength = end - lastDot - 1;
  if (tldLength < 2) return null;
  for (let i = lastDot + 1; i < end; i++) if (!isAlpha(s.charCodeAt(i))) return null;
  // Empty labels ("a@b..com", "a@.b.com") are not a domain.
  for (let i = at + 1; i < end; i++) {
    if (s.charCodeAt(i) === Ch.Dot && (i === at + 1 || s.charCodeAt(i - 1) === Ch.Dot)) return null;
  }
  return [start, end];
}

export function containsEmail(s: string): boolean {
  let at = s.indexOf('@');
  while (at !== -1) {
    if (emailAt(s, at)) return true;
    at = s.indexOf('@', at + 1);
  }
  return false;
}

export function isEmail(s: string): boolean {
  const t = s.trim();
  const at = t.indexOf('@');
  if (at === -1 || t.indexOf('@', at + 1) !== -1) return false;
  const span = emailAt(t, at);
  return span !== null && span[0] === 0 && span[1] === t.length;
}

/** Luhn checksum over a string of digits. */
export function luhnValid(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - Ch.Zero;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

function isRunChar(c: number): boolean {
  return (
    isDigit(c) ||
    c === Ch.Space ||
    c === Ch.Minus ||
    c === Ch.Dot ||
    c === Ch.Plus ||
    c === Ch.OpenParen ||
    c === Ch.CloseParen
  );
}

// Dates such as 2026-11-22 or 22.11.2026 look like separated digit groups; they are not phones.
const DATE_LIKE = /\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{4}/;

/**
 * Classifies one run of digits and separators (already trimmed of leading and trailing
 * separators, except a leading `+` or `(`).
 *
 * Phone: `+` then 8–15 digits (E.164), or 10–11 digits written in at least two groups
 * ("555-123-4567", "(555) 123 4567", "020 7946 0958"). A bare run of digits without `+` is not
 * a phone: ids and epoch timestamps look exactly like that.
 * Card: 13–19 digits, optionally grouped by spaces or dashes, starting with a major network's
 * first digit (2–6), and passing the Luhn check.
 */
function classifyRun(run: string): PiiKind | null {
  let digits = '';
  let groups = 0;
  let inGroup = false;
  let cardSeparatorsOnly = true;
  for (let i = 0; i < run.length; i++) {
    const c = run.charCodeAt(i);
    if (isDigit(c)) {
      digits += run[i];
      if (!inGroup) groups++;
      inGroup = true;
    } else {
      inGroup = false;
      if (c !== Ch.Space && c !== Ch.Minus) cardSeparatorsOnly = false;
    }
  }
  const n = digits.length;
  if (run.charCodeAt(0) === Ch.Plus) {
    if (n >= 8 && n <= 15 && run.lastIndexOf('+') === 0) return 'phone';
  } else if (n >= 10 && n <= 11 && groups >= 2 && run.indexOf('+') === -1 && !DATE_LIKE.test(run)) {
    return 'phone';
  }
  if (n >= 13 && n <= 19 && cardSeparatorsOnly) {
    const first = digits.charCodeAt(0) - Ch.Zero;
    if (first >= 2 && first <= 6 && luhnValid(digits)) return 'card';
  }
  return null;
}

function trimRun(s: string, start: number, end: number): [number, number] {
  while (start < end) {
    const c = s.charCodeAt(start);
    if (isDigit(c) || c === Ch.Plus || c === Ch.OpenParen) break;
    start++;
  }
  while (end > start && !isDigit(s.charCodeAt(end - 1))) end--;
  return [start, end];
}

function scanDigitRuns(s: string): PiiKind | null {
  let i = 0;
  while (i < s.length) {
    if (!isRunChar(s.charCodeAt(i))) {
      i++;
      continue;
    }
    let end = i;
    while (end < s.length && isRunChar(s.charCodeAt(end))) end++;
    const [a, b] = trimRun(s, i, end);
    // A run glued to letters ("abc123-456-7890") is more likely an identifier than a phone.
    if (b - a >= 8 && !(a > 0 && isAlnum(s.charCodeAt(a - 1)))) {
      const kind = classifyRun(s.slice(a, b));
      if (kind) return kind;
    }
    i = end;
  }
  return null;
}

function countDigits(s: string, atLeast: number): boolean {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    if (isDigit(s.charCodeAt(i)) && ++n >= atLeast) return true;
  }
  return false;
}

/** The kind of personal data found in a free-text string, or null. Cheap for ordinary strings. */
export function detectPii(s: string): PiiKind | null {
  // The shortest address is "a@b.co"; the shortest phone or card has 8 digits.
  if (s.length < 6) return null;
  if (s.indexOf('@') !== -1 && containsEmail(s)) return 'email';
  if (s.length < 8 || !countDigits(s, 8)) return null;
  return scanDigitRuns(s);
}

/** True when the whole string is a phone number (a user id that is a phone). */
export function isPhone(s: string): boolean {
  const t = s.trim();
  if (t.length < 8 || t.length > 32) return false;
  for (let i = 0; i < t.length; i++) if (!isRunChar(t.charCodeAt(i))) return false;
  const [a, b] = trimRun(t, 0, t.length);
  return a === 0 && b === t.length && classifyRun(t) === 'phone';
}

/** Email or phone, when the whole value is one (used on anonymousUserId). */
export function identifierKind(s: string): 'email' | 'phone' | null {
  if (s.indexOf('@') !== -1) return isEmail(s) ? 'email' : null;
  return isPhone(s) ? 'phone' : null;
}

export const PSEUDONYM_PREFIX = 'hmac:';

/**
 * A stable pseudonym for an email or phone identifier: the HMAC-SHA256 of its normalised form
 * (an address lower-cased, a phone reduced to `+` and digits) under the app's secret, so that
 * "Ann@x.com" and "ann@x.com" stay one user while the raw value is never stored.
 */
export function pseudonymise(secret: Buffer, kind: 'email' | 'phone', value: string): string {
  const normalised = kind === 'email' ? value.trim().toLowerCase() : value.replace(/[^\d+]/g, '');
  return PSEUDONYM_PREFIX + createHmac('sha256', secret).update(normalised).digest('hex');
}

/**
 * The pseudonym of an account identifier (a Segment `userId`, a PostHog `distinct_id`): the same
 * keyed HMAC under the app's secret. An id that is an email or a phone gets exactly the pseudonym
 * it would get as `anonymousUserId`; any other id is hashed as sent (account ids are case-sensitive).
 */
export function pseudonymiseAccount(secret: Buffer, id: string): string {
  return accountPseudonyms(secret)(id);
}

/** The keyed hash of each app secret in use (apps cache their secret, so one per app). */
const KEYED = new WeakMap<Buffer, (text: string) => string>();

/**
 * pseudonymiseAccount under one app's secret, for the many ids of one request: an email or phone
 * as `pseudonymise` has it, any other id through the secret's keyed hash (keyedSha256), whose
 * padded blocks are laid out once per secret rather than a createHmac per id.
 */
export function accountPseudonyms(secret: Buffer): (id: string) => string {
  let keyed = KEYED.get(secret);
  if (keyed === undefined) KEYED.set(secret, (keyed = keyedSha256(secret, PSEUDONYM_PREFIX)));
  const hmac = keyed;
  return (id) => {
    const kind = identifierKind(id);
    return kind === null ? hmac(id) : pseudonymise(secret, kind, id);
  };
}

const SHA256_BLOCK_BYTES = 64;
/** The UTF-8 bytes of text keyedSha256 hashes in its own buffer; longer text takes createHmac. */
const KEYED_TEXT_BYTES = 1024;

/**
 * HMAC-SHA256 under `key`, as lower-case hex after `prefix` (ASCII): the value of
 * `prefix + createHmac('sha256', key).update(text).digest('hex')`, computed from the definition (RFC 2104)
 * as SHA-256(key ^ opad ‖ SHA-256(key ^ ipad ‖ text)). The padded key blocks are laid out once,
 * and each text costs two one-shot `hash` calls over those buffers: about half the CPU of a
 * createHmac, which makes a stream object and a native context for every text. Not reentrant
 * (it reuses its buffers), which a synchronous function need not be.
 */
export function keyedSha256(key: Buffer, prefix = ''): (text: string) => string {
  const k = key.length > SHA256_BLOCK_BYTES ? createHash('sha256').update(key).digest() : key;
  const inner = Buffer.alloc(SHA256_BLOCK_BYTES + KEYED_TEXT_BYTES);
  const outer = Buffer.alloc(SHA256_BLOCK_BYTES + 32);
  for (let i = 0; i < SHA256_BLOCK_BYTES; i++) {
    inner[i] = (k[i] ?? 0) ^ 0x36;
    outer[i] = (k[i] ?? 0) ^ 0x5c;
  }
  // The inner block's bytes for each text length, made once; the answer is written after the
  // prefix and read as one flat string (rather than a concatenation flattened later).
  const views: Buffer[] = [];
  const out = Buffer.alloc(prefix.length + 64);
  out.write(prefix, 'latin1');
  return (text) => {
    // A UTF-16 unit is at most 3 UTF-8 bytes: within this length, the text always fits.
    if (text.length * 3 > KEYED_TEXT_BYTES) {
      return prefix + createHmac('sha256', key).update(text).digest('hex');
    }
    const end = SHA256_BLOCK_BYTES + inner.write(text, SHA256_BLOCK_BYTES, 'utf8');
    // The inner digest as 32 latin1 characters, one per byte, written back as those bytes.
    const digest = hash('sha256', (views[end] ??= inner.subarray(0, end)), 'binary');
    outer.write(digest, SHA256_BLOCK_BYTES, 'latin1');
    out.write(hash('sha256', outer, 'hex'), prefix.length, 'latin1');
    return out.toString('latin1');
  };
}
