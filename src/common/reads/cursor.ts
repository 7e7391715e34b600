import { openEventId, sealEventId, SEALED_EVENT_ID_BYTES } from '@app/common/event-ids';
import { openCursor, signCursor } from '@app/common/reads/signed-cursor';

/** Where a page ended: the last row's receive time (epoch microseconds) and id. */
export interface CursorPosition {
  receivedUs: bigint;
  id: bigint;
}

const VERSION = 2;
const POSITION_BYTES = 1 + 8 + SEALED_EVENT_ID_BYTES;

/**
 * The cursor of the newest-first listings (events, the quarantine): (version, receivedUs, the id
 * sealed for the app as answers show it, see event-ids), signed with `binding` (the app and
 * filters of the query), so that it only works for the query that produced it and shows no more
 * of a shared id sequence than the records do.
 */
export function encodeCursor(
  secret: Buffer,
  appId: string,
  binding: string,
  position: CursorPosition,
): string {
  const body = Buffer.alloc(POSITION_BYTES);
  body.writeUInt8(VERSION, 0);
  body.writeBigInt64BE(position.receivedUs, 1);
  sealEventId(secret, appId, position.id).copy(body, 9);
  return signCursor(secret, binding, body);
}

/** The position inside a cursor, or null when it is malformed, forged or from another query. */
export function decodeCursor(
  secret: Buffer,
  appId: string,
  binding: string,
  token: string,
): CursorPosition | null {
  const body = openCursor(secret, binding, token, POSITION_BYTES);
  if (body === null || body.length !== POSITION_BYTES || body.readUInt8(0) !== VERSION) return null;
  const receivedUs = body.readBigInt64BE(1);
  const id = openEventId(secret, appId, body.subarray(9));
  if (receivedUs < 0n || id === null) return null;
  return { receivedUs, id };
}

/** An exact timestamptz literal for an epoch-microsecond value (a JS Date only holds ms). */
export function microsLiteral(us: bigint): string {
  const ms = us / 1000n;
  const micros = (us % 1000n).toString().padStart(3, '0');
  return new Date(Number(ms)).toISOString().replace('Z', `${micros}Z`);
}
