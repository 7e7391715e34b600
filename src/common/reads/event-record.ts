import { presentEventId } from '@app/common/event-ids';
import {
  EVENT_FIELDS,
  type EventField,
  type EventFieldSpec,
  type EventPayload,
  type EventRecord,
} from '@app/common/events/event-fields';
import type { EventRecordDto } from './event-record.dto';

/** Each type as the read select list gives it (bigints and times as decimal text). */
interface RowValues {
  id: string;
  uuid: string;
  /** Epoch ms, or epoch µs for a position field. */
  timestamptz: string;
  int8: string;
  text: string;
  bool: boolean;
  float8: number;
  json: EventPayload;
}

/**
 * One stored event as the read queries return it, under the record's keys. Both
 * `GET /api/v1/events` and the export select it with EVENT_ROW_COLUMNS and present it with
 * `toEventRecord`, so the two always give the same record; the quarantine reads its rows alike.
 */
export type EventRow = {
  [F in EventField as F['name']]: RowValues[F['type']] | (F['nullable'] extends true ? null : never);
};

/** A field's value in the select list: times as epoch ms (position fields: µs), bigints as text. */
function selectExpression(f: EventFieldSpec, legacy: boolean): string {
  const c = f.column;
  switch (f.type) {
    case 'id':
    case 'int8':
      return `${c}::text`;
    case 'timestamptz':
      return f.position
        ? `(extract(epoch FROM ${c}) * 1000000)::bigint::text`
        : `floor(extract(epoch FROM ${c}) * 1000)::bigint::text`;
    case 'json':
      return legacy && f.legacyColumn ? `coalesce(${c}, ${f.legacyColumn}::json)` : c;
    default:
      return c;
  }
}

/**
 * The select list that yields an EventRow, over a table with the stored event's columns:
 * `events` (whose older payload column is read where the json one is null) or `quarantine`.
 */
export function eventRowColumns(table: 'events' | 'quarantine'): string {
  return EVENT_FIELDS.map((f) => `${selectExpression(f, table === 'events')} AS "${f.name}"`).join(', ');
}

/** The select list (over `events`) that yields an EventRow. */
export const EVENT_ROW_COLUMNS = eventRowColumns('events');

const IDENTIFIER = /^[A-Za-z][A-Za-z0-9]*$/;
const APP = EVENT_FIELDS.find((f) => f.type === 'uuid')!.name;

/** A field's record value, as an expression over `row`. */
function recordExpression(f: EventFieldSpec): string {
  if (!IDENTIFIER.test(f.name)) throw new Error(`event record: not a field name: ${f.name}`);
  const value = `row.${f.name}`;
  switch (f.type) {
    case 'id':
      return `present(secret, row.${APP}, ${value})`;
    case 'int8':
      return f.nullable ? `${value} === null ? null : Number(${value})` : `Number(${value})`;
    case 'timestamptz':
      return f.position ? `Number(BigInt(${value}) / 1000n)` : `Number(${value})`;
    default:
      return value;
  }
}

/**
 * The mapping compiled from EVENT_FIELDS into one object literal, so that every record has the
 * same shape and each field is one property read; a loop over the table costs a fifth more.
 */
const toRecord = new Function(
  'present',
  'secret',
  'row',
  `return { ${EVENT_FIELDS.map((f) => `${f.name}: ${recordExpression(f)}`).join(', ')} };`,
) as (present: typeof presentEventId, secret: Buffer, row: EventRow) => EventRecord;

/**
 * The record every read answers with, for one stored row. `secret` is the cursor key, from which
 * each app's opaque ids are derived (src/common/event-ids.ts).
 */
export function toEventRecord(secret: Buffer, row: EventRow): EventRecordDto {
  return toRecord(presentEventId, secret, row);
}
