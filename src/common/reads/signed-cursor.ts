import { createHmac, timingSafeEqual } from 'node:crypto';
import { AppError } from '@app/common/app-error';

const MAC_BYTES = 16;

function mac(secret: Buffer, binding: string, body: Buffer): Buffer {
  return createHmac('sha256', secret)
    .update(body)
    .update('\n')
    .update(binding)
    .digest()
    .subarray(0, MAC_BYTES);
}

/**
 * An opaque, tamper-evident paging cursor: base64url of `body` (where the page ended, in a format
 * of the caller's) plus a truncated HMAC-SHA256 over that body and `binding` (the app and
 * parameters of the query). A cursor therefore only works for the query that produced it.
 */
export function signCursor(secret: Buffer, binding: string, body: Buffer): string {
  return Buffer.concat([body, mac(secret, binding, body)]).toString('base64url');
}

/**
 * The body inside a cursor, or null when it is malformed, forged or from another query. Tokens
 * longer than `maxBodyBytes` are refused before any hashing.
 */
export function openCursor(
  secret: Buffer,
  binding: string,
  token: string,
  maxBodyBytes: number,
): Buffer | null {
  if (token.length > Math.ceil(((maxBodyBytes + MAC_BYTES) * 4) / 3) || !/^[A-Za-z0-9_-]+$/.test(token)) {
    return null;
  }
  const raw = Buffer.from(token, 'base64url');
  if (raw.length <= MAC_BYTES || raw.toString('base64url') !== token) return null;
  const body = raw.subarray(0, raw.length - MAC_BYTES);
  if (!timingSafeEqual(raw.subarray(body.length), mac(secret, binding, body))) return null;
  return body;
}

/** The position a request's `cursor` names: null without one (the first page), else 400 `invalid_cursor`. */
export function cursorPosition<P>(token: string | undefined, decode: (token: string) => P | null): P | null {
  if (token === undefined) return null;
  const position = decode(token);
  if (position === null) {
    throw new AppError(
      'invalid_cursor',
      'The cursor is malformed, was altered, or belongs to a query with other parameters.',
    );
  }
  return position;
}
