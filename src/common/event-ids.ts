import { createCipheriv, createDecipheriv, createHmac } from 'node:crypto';
import type { Cipher, Decipher } from 'node:crypto';

/**
 * Event ids as answers show them. Events are numbered by one sequence shared by every app, so
 * the stored number would let any tenant estimate the service's total volume. Answers carry
 * instead an opaque id of 22 base64url characters: one AES-128 block, holding the stored id
 * (8 bytes, big-endian) followed by 8 zero bytes, encrypted with a key of the app (the first
 * 16 bytes of HMAC-SHA256(server secret, "tally event id\n" + app id)). The same event always
 * shows the same id; two apps' ids share nothing; only the server can turn one back into the
 * stored number, and a changed or foreign id decrypts to non-zero padding and is refused.
 *
 * `secret` is the server's secret (the `cursor` row of server_secrets). Plain functions, no
 * framework: the events listing, its cursor and the export's `after=` all use them.
 */
export const EVENT_ID_PATTERN = /^[A-Za-z0-9_-]{22}$/;
export const SEALED_EVENT_ID_BYTES = 16;
/** The length of a presented id: 16 bytes in base64url, unpadded. */
export const PRESENTED_EVENT_ID_CHARS = 22;

interface AppCodec {
  cipher: Cipher;
  decipher: Decipher;
}

// Per secret, per app: an AES-ECB cipher and decipher kept open. ECB encrypts each 16-byte
// block alone, so one object serves any number of ids, and building one costs several ids' worth.
const codecs = new WeakMap<Buffer, Map<string, AppCodec>>();
const MAX_APPS_CACHED = 1000;

function codecOf(secret: Buffer, appId: string): AppCodec {
  let apps = codecs.get(secret);
  if (!apps) codecs.set(secret, (apps = new Map()));
  const app = appId.toLowerCase();
  let codec = apps.get(app);
  if (!codec) {
    const key = createHmac('sha256', secret).update(`tally event id\n${app}`).digest().subarray(0, 16);
    codec = {
      cipher: createCipheriv('aes-128-ecb', key, null).setAutoPadding(false),
      decipher: createDecipheriv('aes-128-ecb', key, null).setAutoPadding(false),
    };
    if (apps.size >= MAX_APPS_CACHED) apps.clear();
    apps.set(app, codec);
  }
  return codec;
}

/** The stored id, encrypted for `appId`: 16 bytes (the cursor carries these). */
export function sealEventId(secret: Buffer, appId: string, id: bigint | string | number): Buffer {
  const block = Buffer.alloc(SEALED_EVENT_ID_BYTES);
  block.writeBigUInt64BE(BigInt(id), 0);
  return codecOf(secret, appId).cipher.update(block);
}

/** The stored id inside `sealed`, or null when it was not sealed for `appId` with `secret`. */
export function openEventId(secret: Buffer, appId: string, sealed: Buffer): bigint | null {
  if (sealed.length !== SEALED_EVENT_ID_BYTES) return null;
  const block = codecOf(secret, appId).decipher.update(sealed);
  if (block.readBigUInt64BE(8) !== 0n) return null;
  const id = block.readBigUInt64BE(0);
  return id > 0n && id < 2n ** 63n ? id : null;
}

/** The id an answer shows for stored event `id` of `appId`. */
export function presentEventId(secret: Buffer, appId: string, id: bigint | string | number): string {
  return sealEventId(secret, appId, id).toString('base64url');
}

/** The stored id behind a presented id of `appId`, or null when it is malformed, altered or another app's. */
export function parseEventId(secret: Buffer, appId: string, text: string): bigint | null {
  if (!EVENT_ID_PATTERN.test(text)) return null;
  const sealed = Buffer.from(text, 'base64url');
  // base64url has several spellings of the last character; only the canonical one is an id.
  if (sealed.toString('base64url') !== text) return null;
  return openEventId(secret, appId, sealed);
}

/**
 * Seals many stored ids of `appId` at once: `blocks` holds one 16-byte block per id (the id
 * big-endian in its first 8 bytes, zeros after), as `sealEventId` builds it. One cipher call
 * for a whole export chunk instead of one per event.
 */
export function sealEventIdBlocks(secret: Buffer, appId: string, blocks: Buffer): Buffer {
  if (blocks.length % SEALED_EVENT_ID_BYTES !== 0) throw new RangeError('whole 16-byte blocks expected');
  return codecOf(secret, appId).cipher.update(blocks);
}

const BASE64URL = Buffer.from('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_', 'latin1');

/**
 * Writes the 16 bytes of `sealed` at `from` as the 22 base64url characters of a presented id
 * into `out` at `at`: what `presentEventId` returns, without a string per id.
 */
export function writePresentedEventId(sealed: Buffer, from: number, out: Buffer, at: number): void {
  let o = at;
  for (let i = from, end = from + 15; i < end; i += 3) {
    const n = (sealed[i] << 16) | (sealed[i + 1] << 8) | sealed[i + 2];
    out[o++] = BASE64URL[n >> 18];
    out[o++] = BASE64URL[(n >> 12) & 63];
    out[o++] = BASE64URL[(n >> 6) & 63];
    out[o++] = BASE64URL[n & 63];
  }
  const last = sealed[from + 15];
  out[o++] = BASE64URL[last >> 2];
  out[o] = BASE64URL[(last & 3) << 4];
}
