import type { ElementType } from '@app/database/binary-arrays';

/**
 * The stored event, described once. Every field of an event record, with its column in `events`
 * (and `quarantine`), its type and its bounds. Ingest's statement, the read and replay select
 * lists, the quarantine's insert, the export's COPY columns, its NDJSON keys and Parquet schema,
 * the validator's known fields and the TypeScript types of an event are all derived from
 * EVENT_FIELDS, so that a field cannot be in one of them and missing from another.
 */

/** Field limits of an event (docs/ingest.md). Lengths count Unicode code points. */
export const EVENT_LIMITS = {
  eventNameMax: 200,
  identifierMax: 200,
  contextMax: 100,
  payloadMaxKeys: 100,
  payloadKeyMax: 128,
  payloadStringMax: 1024,
} as const;

/** A flat payload as stored: string, finite number or boolean values. */
export type EventPayload = Record<string, string | number | boolean>;

/** How a field's type is stored, cast in SQL, sent in binary arrays, and held in TypeScript. */
export const FIELD_TYPES = {
  /** The stored id (a sequence), presented opaque (common/event-ids.ts). */
  id: { sql: 'bigint', cast: 'bigint', element: null },
  uuid: { sql: 'uuid', cast: 'uuid', element: 'uuid' },
  timestamptz: { sql: 'timestamp with time zone', cast: 'timestamptz', element: 'timestamptz' },
  int8: { sql: 'bigint', cast: 'bigint', element: 'int8' },
  text: { sql: 'text', cast: 'text', element: 'text' },
  bool: { sql: 'boolean', cast: 'boolean', element: 'bool' },
  float8: { sql: 'double precision', cast: 'float8', element: 'float8' },
  json: { sql: 'json', cast: 'json', element: 'json' },
} as const satisfies Record<
  string,
  {
    /** As information_schema.columns names it. */
    sql: string;
    /** As statements cast to it. */
    cast: string;
    /** The element type of ingest's binary arrays (null: never written by ingest). */
    element: keyof typeof ElementType | null;
  }
>;

export type EventFieldType = keyof typeof FIELD_TYPES;

/** The TypeScript value of each type (epoch ms for times; the id as a decimal string). */
interface FieldValues {
  id: string;
  uuid: string;
  timestamptz: number;
  int8: number;
  text: string;
  bool: boolean;
  float8: number;
  json: EventPayload;
}

export interface EventFieldSpec {
  /** The record's key: in API answers, NDJSON lines and Parquet columns. */
  readonly name: string;
  /** Its key in an event as ingest holds it, where it differs from `name`. */
  readonly key?: string;
  /** Its column in `events` and `quarantine`. */
  readonly column: string;
  /** An older column read where `column` is null (`events` only). */
  readonly legacyColumn?: string;
  readonly type: EventFieldType;
  readonly nullable: boolean;
  /**
   * Where the value comes from: the database (`id`), the request (the app and the receive time,
   * one per batch), or the event itself (what ingest validates and holds per event).
   */
  readonly source: 'database' | 'request' | 'event';
  /** Sent by clients in an ingest event (the validator's known fields). */
  readonly sent?: true;
  /** Bounds of a text field, in code points. */
  readonly minLength?: number;
  readonly maxLength?: number;
  /** Control characters reject the event (the read filters' fields). */
  readonly noControl?: true;
  /** A text format that is normalised; another format is dropped with a warning. */
  readonly format?: 'bcp47' | 'timezone';
  /** A built-in breakdown dimension: a string field events are grouped by. */
  readonly dimension?: true;
  /** An integer of epoch milliseconds (Parquet: a timestamp). */
  readonly epochMs?: true;
  /** Part of the keyset position reads page by (receivedAt then id); read in microseconds. */
  readonly position?: true;
  /** Where the Segment and PostHog wire formats carry the field, for those they map as sent. */
  readonly wire?: WireSource;
}

/**
 * A field's place in the SDK wire formats (src/sdk-formats/): a dotted path in a Segment
 * message's `context` (the message's own part, else the batch's), and a PostHog `$`-property.
 */
export interface WireSource {
  readonly segment?: string;
  readonly posthog: string;
  /** A number sent there is taken as its decimal string (mobile SDKs send some builds as numbers). */
  readonly numberAsText?: true;
}

const { eventNameMax, identifierMax, contextMax } = EVENT_LIMITS;

/** The stored event's fields, in the order of an event record (and of its JSON). */
export const EVENT_FIELDS = [
  { name: 'id', column: 'id', type: 'id', nullable: false, source: 'database', position: true },
  { name: 'appId', column: 'app_id', type: 'uuid', nullable: false, source: 'request' },
  {
    name: 'eventName',
    column: 'event_name',
    type: 'text',
    nullable: false,
    source: 'event',
    sent: true,
    minLength: 1,
    maxLength: eventNameMax,
    noControl: true,
    dimension: true,
  },
  {
    name: 'anonymousUserId',
    column: 'anonymous_user_id',
    type: 'text',
    nullable: true,
    source: 'event',
    sent: true,
    maxLength: identifierMax,
    noControl: true,
  },
  {
    name: 'sessionId',
    column: 'session_id',
    type: 'text',
    nullable: true,
    source: 'event',
    sent: true,
    maxLength: identifierMax,
    noControl: true,
    wire: { posthog: '$session_id' },
  },
  {
    name: 'eventTime',
    column: 'event_time',
    type: 'int8',
    nullable: true,
    source: 'event',
    sent: true,
    epochMs: true,
  },
  { name: 'timestamp', key: 'ts', column: 'ts', type: 'timestamptz', nullable: false, source: 'event' },
  {
    name: 'receivedAt',
    column: 'received_at',
    type: 'timestamptz',
    nullable: false,
    source: 'request',
    position: true,
  },
  {
    name: 'eventId',
    column: 'event_id',
    type: 'text',
    nullable: true,
    source: 'event',
    sent: true,
    minLength: 1,
    maxLength: identifierMax,
  },
  { name: 'isTestMode', column: 'is_test_mode', type: 'bool', nullable: false, source: 'event', sent: true },
  context('platform', 'platform', true, { segment: 'os.name', posthog: '$os' }),
  context('appVersion', 'app_version', true, { segment: 'app.version', posthog: '$app_version' }),
  context('buildNumber', 'build_number', false, {
    segment: 'app.build',
    posthog: '$app_build',
    numberAsText: true,
  }),
  context('osVersion', 'os_version', true, { segment: 'os.version', posthog: '$os_version' }),
  context('deviceModel', 'device_model', true, { segment: 'device.model', posthog: '$device_model' }),
  {
    name: 'locale',
    column: 'locale',
    type: 'text',
    nullable: true,
    source: 'event',
    sent: true,
    format: 'bcp47',
    dimension: true,
    wire: { segment: 'locale', posthog: '$locale' },
  },
  {
    name: 'timezone',
    column: 'timezone',
    type: 'text',
    nullable: true,
    source: 'event',
    sent: true,
    format: 'timezone',
    wire: { segment: 'timezone', posthog: '$timezone' },
  },
  { name: 'floatValue', column: 'float_value', type: 'float8', nullable: true, source: 'event', sent: true },
  {
    name: 'payload',
    column: 'payload_json',
    legacyColumn: 'payload',
    type: 'json',
    nullable: true,
    source: 'event',
    sent: true,
  },
] as const satisfies readonly EventFieldSpec[];

export type EventField = (typeof EVENT_FIELDS)[number];
export type EventFieldName = EventField['name'];

/** A context field: an optional string of at most EVENT_LIMITS.contextMax characters. */
function context<N extends string, C extends string, D extends boolean>(
  name: N,
  column: C,
  dimension: D,
  wire: WireSource,
) {
  const field = {
    name,
    column,
    type: 'text',
    nullable: true,
    source: 'event',
    sent: true,
    maxLength: contextMax,
    wire,
  } as const;
  return (dimension ? { ...field, dimension: true } : field) as D extends true
    ? typeof field & { readonly dimension: true }
    : typeof field;
}

type KeyOf<F extends EventField> = F extends { key: infer K extends string } ? K : F['name'];
type ValueOf<F extends EventField> = FieldValues[F['type']] | (F['nullable'] extends true ? null : never);

/** An event record as every read answers it (GET /api/v1/events, the export, the quarantine). */
export type EventRecord = { [F in EventField as F['name']]: ValueOf<F> };

/** The values of one event as ingest holds and stores it (what the event itself brings). */
export type EventValues = { [F in EventField as F['source'] extends 'event' ? KeyOf<F> : never]: ValueOf<F> };

/** The key of a field in EventValues. */
export const keyOf = (f: EventFieldSpec): string => f.key ?? f.name;

const BY_NAME = new Map<string, EventField>(EVENT_FIELDS.map((f) => [f.name, f]));

/** The descriptor of one field. */
export function eventField<N extends EventFieldName>(name: N): Extract<EventField, { name: N }> {
  return BY_NAME.get(name) as Extract<EventField, { name: N }>;
}

/** The column of one field. */
export function columnOf<N extends EventFieldName>(name: N): ColumnOf<N> {
  const { column } = eventField(name) as EventFieldSpec;
  return column as ColumnOf<N>;
}

type ColumnOf<N extends EventFieldName> = Extract<EventField, { name: N }>['column'];

/**
 * Every field's column by field name, for the statements over `events` that repositories write
 * by hand (aggregates, filters): `${EVENT_COLUMN.sessionId}` rather than the column's name.
 */
export const EVENT_COLUMN = Object.freeze(
  Object.fromEntries(EVENT_FIELDS.map((f) => [f.name, f.column])),
) as {
  readonly [F in EventField as F['name']]: F['column'];
};

/** The fields of one source, in record order. */
export function fieldsFrom<S extends EventFieldSpec['source']>(
  source: S,
): Extract<EventField, { source: S }>[] {
  return EVENT_FIELDS.filter((f): f is Extract<EventField, { source: S }> => f.source === source);
}

export type SentField = Extract<EventField, { sent: true }>;
/** The fields an ingest event may carry, in record order: anything else is ignored with a warning. */
export const SENT_FIELDS: readonly SentField[] = EVENT_FIELDS.filter((f): f is SentField => 'sent' in f);
export const SENT_FIELD_NAMES: readonly EventFieldName[] = SENT_FIELDS.map((f) => f.name);

export type DimensionField = Extract<EventField, { dimension: true }>;
/** The built-in breakdown dimensions: string fields of the event, in record order. */
export const DIMENSION_FIELDS: readonly DimensionField[] = EVENT_FIELDS.filter(
  (f): f is DimensionField => 'dimension' in f,
);
export type DimensionName = DimensionField['name'];

/** The keyset position reads page by, in order: the receive time, then the stored id. */
export const POSITION_FIELDS = [eventField('receivedAt'), eventField('id')] as const;

/** A field the SDK wire formats carry as it is, with where they carry it. */
export type WireField = EventFieldSpec & { readonly name: EventFieldName; readonly wire: WireSource };
/** The fields the Segment and PostHog formats map straight from where they carry them. */
export const WIRE_FIELDS: readonly WireField[] = EVENT_FIELDS.filter(
  (f): f is EventField & WireField => 'wire' in f,
);
