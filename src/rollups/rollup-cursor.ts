import { openCursor, signCursor } from '@app/common/reads/signed-cursor';
import { DAY_MS } from '@app/common/time';

/** Where a rollups page ended: the last row's (day, eventName, isTestMode), the answer's order. */
export interface RollupPosition {
  /** `YYYY-MM-DD`. */
  day: string;
  /** '' for the app-wide total row. */
  eventName: string;
  isTestMode: boolean;
}

const VERSION = 2;
const HEAD_BYTES = 1 + 4 + 1;
// eventName is at most 200 characters, so at most 800 bytes of UTF-8.
const MAX_BODY_BYTES = HEAD_BYTES + 800;

/** A rollups cursor, signed with `binding` (the app and parameters of the query). */
export function encodeRollupCursor(secret: Buffer, binding: string, position: RollupPosition): string {
  const name = Buffer.from(position.eventName, 'utf8');
  const body = Buffer.alloc(HEAD_BYTES + name.length);
  body.writeUInt8(VERSION, 0);
  body.writeInt32BE(Date.parse(`${position.day}T00:00:00Z`) / DAY_MS, 1);
  body.writeUInt8(position.isTestMode ? 1 : 0, 5);
  name.copy(body, HEAD_BYTES);
  return signCursor(secret, binding, body);
}

/** The position inside a cursor, or null when it is malformed, forged or from another query. */
export function decodeRollupCursor(secret: Buffer, binding: string, token: string): RollupPosition | null {
  const body = openCursor(secret, binding, token, MAX_BODY_BYTES);
  if (body === null || body.length < HEAD_BYTES || body.readUInt8(0) !== VERSION) return null;
  const mode = body.readUInt8(5);
  if (mode > 1) return null;
  return {
    day: new Date(body.readInt32BE(1) * DAY_MS).toISOString().slice(0, 10),
    eventName: body.subarray(HEAD_BYTES).toString('utf8'),
    isTestMode: mode === 1,
  };
}
