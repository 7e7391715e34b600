import { createHmac, timingSafeEqual } from 'node:crypto';

/** Where a page ended: the last row's receive time (epoch microseconds) and id. */
export interface CursorPosition {
  receivedUs: bigint;
  id: bigint;
}

const VERSION = 1;
const POSITION_BYTES = 1 + 8 + 8;
const MAC_BYTES = 16;

function mac(secret: Buffer, binding: string, position: Buffer): Buffer {
  return createHmac('sha256', secret)
    .update(position)
    .update('\n')
    .update(binding)
    .digest()
    .subarray(0, MAC_BYTES);
}

/**
 * An opaque, tamper-evident cursor: base64url of (version, receivedUs, id) plus a truncated
 * HMAC-SHA256 over that position and `binding` (the app and filters of the query). A cursor
 * therefore only works for the query that produced it.
 */
export function encodeCursor(secret: Buffer, binding: string, position: CursorPosition): string {
  const body = Buffer.alloc(POSITION_BYTES);
  body.writeUInt8(VERSION, 0);
  body.writeBigInt64BE(position.receivedUs, 1);
  body.writeBigInt64BE(position.id, 9);
  return Buffer.concat([body, mac(secret, binding, body)]).toString('base64url');
}

/** The position inside a cursor, or null when it is malformed, forged or from another query. */
export function decodeCursor(secret: Buffer, binding: string, token: string): CursorPosition | null {
  if (!/^[A-Za-z0-9_-]+$/.test(token)) return null;
  const raw = Buffer.from(token, 'base64url');
  if (raw.length !== POSITION_BYTES + MAC_BYTES || raw.toString('base64url') !== token) return null;
  const body = raw.subarray(0, POSITION_BYTES);
  if (body.readUInt8(0) !== VERSION) return null;
  if (!timingSafeEqual(raw.subarray(POSITION_BYTES), mac(secret, binding, body))) return null;
  const position = { receivedUs: body.readBigInt64BE(1), id: body.readBigInt64BE(9) };
  if (position.receivedUs < 0n || position.id < 0n) return null;
  return position;
}

/** An exact timestamptz literal for an epoch-microsecond value (a JS Date only holds ms). */
export function microsLiteral(us: bigint): string {
  const ms = us / 1000n;
  const micros = (us % 1000n).toString().padStart(3, '0');
  return new Date(Number(ms)).toISOString().replace('Z', `${micros}Z`);
}
