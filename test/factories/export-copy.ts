import { userKey } from '@app/common/user-keys';
import { toEventRecord } from '@app/common/reads/event-record';
import { ExportUserKeys } from '@app/export/export-user-keys';
import type { ExportRecord } from '@app/export/export-parquet';
import fc from 'fast-check';
import type { EventRow } from '@app/common/reads/event-record';
import type { EventRecordDto } from '@app/common/reads/event-record.dto';
import { COLUMNS, EXPORT_FIELDS } from '@app/export/copy-rows';

/**
 * Stored rows for the export's tests: as PostgreSQL's binary COPY of the export's columns
 * carries them (EXPORT_FIELDS of src/export/copy-rows.ts), and as the driver gives the
 * same row to GET /api/v1/events, with fast-check arbitraries over every awkward value.
 */

export const SECRET = Buffer.alloc(32, 7);
export const APP_ID = '0b7f3c1e-5d2a-4c8e-9f10-2a3b4c5d6e7f';
/** The key of the records' userKeys (common/user-keys.ts). */
export const USER_KEY_SECRET = Buffer.alloc(32, 9);

/** A fresh ExportUserKeys of the fixtures' app, as one export has. */
export const exportUserKeys = () => new ExportUserKeys(USER_KEY_SECRET, APP_ID);
const PG_EPOCH_US = 946_684_800_000_000n;

/**
 * One stored row as the binary COPY carries it (EXPORT_FIELDS): the
 * record's text, flag and float fields as they are, times in epoch microseconds, the stored
 * id, and the payload as the json or the older jsonb column holds it.
 */
export type StoredRow = Omit<
  EventRecordDto,
  'id' | 'appId' | 'eventTime' | 'timestamp' | 'receivedAt' | 'payload'
> & {
  receivedUs: bigint;
  id: bigint;
  eventTime: bigint | null;
  tsUs: bigint;
  payloadJson: string | null;
  payloadJsonb: string | null;
};

const int64 = (value: bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(value);
  return b;
};
const field = (value: Buffer | null) => {
  const length = Buffer.alloc(4);
  length.writeInt32BE(value === null ? -1 : value.length);
  return value === null ? [length] : [length, value];
};
const text = (value: string | null) => field(value === null ? null : Buffer.from(value, 'utf8'));

/** One stored field of a row as the binary COPY carries it (null: SQL null). */
function copyValue(r: StoredRow, f: (typeof EXPORT_FIELDS)[number]): Buffer | null {
  switch (f.name) {
    case 'id':
      return int64(r.id);
    case 'receivedAt':
      return int64(r.receivedUs - PG_EPOCH_US);
    case 'timestamp':
      return int64(r.tsUs - PG_EPOCH_US);
    case 'eventTime':
      return r.eventTime === null ? null : int64(r.eventTime);
    case 'isTestMode':
      return Buffer.from([r.isTestMode ? 1 : 0]);
    case 'floatValue': {
      if (r.floatValue === null) return null;
      const float = Buffer.alloc(8);
      float.writeDoubleBE(r.floatValue);
      return float;
    }
    case 'payload':
      return r.payloadJson === null ? null : Buffer.from(r.payloadJson, 'utf8');
    default: {
      const value = r[f.name];
      return value === null ? null : Buffer.from(value, 'utf8');
    }
  }
}

/** PostgreSQL's binary COPY of `rows`: signature, flags, header extension, rows, trailer. */
export function binaryCopy(rows: StoredRow[]): Buffer {
  const parts: Buffer[] = [Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(8)];
  for (const r of rows) {
    const count = Buffer.alloc(2);
    count.writeInt16BE(COLUMNS);
    parts.push(count, ...EXPORT_FIELDS.flatMap((f) => field(copyValue(r, f))), ...text(r.payloadJsonb));
  }
  parts.push(Buffer.from([0xff, 0xff]));
  return Buffer.concat(parts);
}

/** floor(µs / 1000) as a decimal string, as floor(extract(epoch FROM ts) * 1000) gives it. */
const flooredMs = (us: bigint) => (us / 1000n - (us % 1000n < 0n ? 1n : 0n)).toString();

/** The same row as the driver gives it to GET /api/v1/events (EVENT_ROW_COLUMNS). */
export function asEventRow(r: StoredRow): EventRow {
  const payload = r.payloadJson ?? r.payloadJsonb;
  return {
    ...r,
    id: r.id.toString(),
    appId: APP_ID,
    eventTime: r.eventTime === null ? null : r.eventTime.toString(),
    timestamp: flooredMs(r.tsUs),
    receivedAt: r.receivedUs.toString(),
    payload: payload === null ? null : (JSON.parse(payload) as EventRow['payload']),
  };
}

// Characters JSON.stringify escapes, or that take several UTF-8 bytes; PostgreSQL text holds any
// code point but NUL and the surrogates.
const SPECIAL = [1, 8, 9, 10, 12, 13, 0x1f, 0x22, 0x2f, 0x5c, 0x7f, 0xe9, 0x2028, 0xfeff, 0x1f600];
const codePoint = fc.oneof(
  fc.constantFrom(...SPECIAL),
  fc.integer({ min: 0x20, max: 0x7e }),
  fc.integer({ min: 1, max: 0xd7ff }),
  fc.integer({ min: 0xe000, max: 0x10ffff }),
);
const pgText = fc.array(codePoint, { maxLength: 12 }).map((points) => String.fromCodePoint(...points));
const maybe = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: null });
const INT64 = { min: -(2n ** 63n), max: 2n ** 63n - 1n };
// Microseconds since 1970 within PostgreSQL's timestamp range (4713 BC to 294276 AD).
const epochUs = fc.oneof(
  fc.bigInt({ min: 1_500_000_000_000_000n, max: 2_000_000_000_000_000n }),
  fc.bigInt({ min: -210_000_000_000_000_000n, max: 9_000_000_000_000_000_000n }),
  fc.constantFrom(-1n, -999n, -1000n, -1001n, 0n, 999n, 1000n),
  // Beyond 2^53 µs, where a number would round before the division.
  fc.constantFrom(9_007_199_254_741_999n, 18_014_398_509_483_999n, -9_007_199_254_741_999n),
);
const float = fc.oneof(
  fc.double(),
  fc.constantFrom(-0, 1e-4, 9.99e-5, 1e15, 1e21, 123e-20, Number.MAX_VALUE, Number.MIN_VALUE, NaN, -Infinity),
);
const scalar = fc.oneof(
  pgText,
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.integer(),
);
const payloadObject = fc.dictionary(pgText, scalar, { maxKeys: 4 });
export const storedRow: fc.Arbitrary<StoredRow> = fc.record({
  receivedUs: epochUs,
  id: fc.bigInt({ min: 1n, max: INT64.max }),
  eventName: pgText,
  anonymousUserId: maybe(pgText),
  sessionId: maybe(pgText),
  eventTime: maybe(fc.oneof(fc.bigInt(INT64), fc.bigInt({ min: -(2n ** 53n), max: 2n ** 53n }))),
  tsUs: epochUs,
  eventId: maybe(pgText),
  isTestMode: fc.boolean(),
  platform: maybe(pgText),
  appVersion: maybe(pgText),
  buildNumber: maybe(pgText),
  osVersion: maybe(pgText),
  deviceModel: maybe(pgText),
  locale: maybe(pgText),
  timezone: maybe(pgText),
  floatValue: maybe(float),
  // Either the json text ingest stores (compact), or the older jsonb column's text (spaced).
  payloadJson: maybe(payloadObject.map((p) => JSON.stringify(p))),
  payloadJsonb: maybe(payloadObject.map((p) => JSON.stringify(p, null, 1))),
});

export const plainRow = (over: Partial<StoredRow> = {}): StoredRow => ({
  receivedUs: 1_795_478_400_123_456n,
  id: 42n,
  eventName: 'App.opened',
  anonymousUserId: 'u1',
  sessionId: null,
  eventTime: 1_795_478_399_700n,
  tsUs: 1_795_478_399_700_000n,
  eventId: 'e-1',
  isTestMode: false,
  platform: 'ios',
  appVersion: null,
  buildNumber: null,
  osVersion: null,
  deviceModel: null,
  locale: 'en-US',
  timezone: null,
  floatValue: 2.5,
  payloadJson: '{"plan":"pro"}',
  payloadJsonb: null,
  ...over,
});

/** The exported record of a stored row: its event record and its user's key (common/user-keys.ts). */
export function exportRecord(r: StoredRow): ExportRecord {
  const record = toEventRecord(SECRET, asEventRow(r));
  const key =
    record.anonymousUserId === null ? null : userKey(USER_KEY_SECRET, APP_ID, record.anonymousUserId);
  return { ...record, userKey: key };
}
