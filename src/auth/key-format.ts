import { createHash, randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';

/** An active key neither used nor made in this many days is flagged `unused` (tally keys list). */
export const UNUSED_AFTER_DAYS = 30;

/**
 * Key format: `tly_<kind>_<secret><checksum>`.
 *
 * - kind: `live` or `test` (ingest keys) or `api` (read keys);
 * - secret: 32 bytes from the CSPRNG, base62, left-padded to 43 characters;
 * - checksum: CRC32 of everything before it, base62, left-padded to 6 characters.
 *
 * The checksum lets a mistyped or truncated key be refused without a database lookup, and the
 * fixed shape lets secret scanners recognise a leaked key.
 */
export const KEY_MARKER = 'tly';
export type KeyPrefixKind = 'live' | 'test' | 'api';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const SECRET_LENGTH = 43;
const CHECKSUM_LENGTH = 6;
const KEY_PATTERN = /^tly_(live|test|api)_([0-9A-Za-z]{43})([0-9A-Za-z]{6})$/;

export function base62(bytes: Buffer, width: number): string {
  let n = BigInt('0x' + (bytes.length ? bytes.toString('hex') : '0'));
  let out = '';
  while (n > 0n) {
    out = ALPHABET[Number(n % 62n)] + out;
    n /= 62n;
  }
  return out.padStart(width, '0');
}

function checksum(body: string): string {
  const buf = Buffer.alloc(4);
  buf.writeUInt32BE(crc32(body) >>> 0);
  return base62(buf, CHECKSUM_LENGTH);
}

export function generateKey(kind: KeyPrefixKind): string {
  const body = `${KEY_MARKER}_${kind}_${base62(randomBytes(32), SECRET_LENGTH)}`;
  return body + checksum(body);
}

export interface ParsedKey {
  kind: KeyPrefixKind;
}

/** Checks the shape and checksum of a presented key; null when it cannot be a Tally key. */
export function parseKey(presented: string): ParsedKey | null {
  const match = KEY_PATTERN.exec(presented);
  if (!match) return null;
  const body = presented.slice(0, presented.length - CHECKSUM_LENGTH);
  if (checksum(body) !== match[3]) return null;
  return { kind: match[1] as KeyPrefixKind };
}

export function hashKey(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

/** The mask shown in listings: the prefix and the last four characters. */
export function maskKey(kind: KeyPrefixKind, last4: string): string {
  return `${KEY_MARKER}_${kind}_…${last4}`;
}
