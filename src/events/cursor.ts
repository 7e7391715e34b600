import { openCursor, signCursor } from '@app/common/reads/signed-cursor';

/** Where a page ended: the last row's receive time (epoch microseconds) and id. */
export interface CursorPosition {
  receivedUs: bigint;
  id: bigint;
}

const VERSION = 1;
const POSITION_BYTES = 1 + 8 + 8;

/**
 * An events cursor: (version, receivedUs, id), signed with `binding` (the app and filters of the
 * query), so that it only works for the query that produced it.
 */
export function encodeCursor(secret: Buffer, binding: string, position: CursorPosition): string {
  const body = Buffer.alloc(POSITION_BYTES);
  body.writeUInt8(VERSION, 0);
  body.writeBigInt64BE(position.receivedUs, 1);
  body.writeBigInt64BE(position.id, 9);
  return signCursor(secret, binding, body);
}

/** The position inside a cursor, or null when it is malformed, forged or from another query. */
export function decodeCursor(secret: Buffer, binding: string, token: string): CursorPosition | null {
  const body = openCursor(secret, binding, token, POSITION_BYTES);
  if (body === null || body.length !== POSITION_BYTES || body.readUInt8(0) !== VERSION) return null;
  const position = { receivedUs: body.readBigInt64BE(1), id: body.readBigInt64BE(9) };
  if (position.receivedUs < 0n || position.id < 0n) return null;
  return position;
}
