import { EventRecordDto } from '@app/common/reads/event-record.dto';
import { eventRowColumns } from '@app/common/reads/event-record';
import {
  columnOf,
  DIMENSION_FIELDS,
  EVENT_FIELDS,
  eventField,
  FIELD_TYPES,
  fieldsFrom,
  keyOf,
  POSITION_FIELDS,
  SENT_FIELD_NAMES,
  EVENT_COLUMN,
  WIRE_FIELDS,
} from './event-fields';

/** Where @nestjs/swagger's ApiProperty lists a class's properties (its DECORATORS constant). */
const API_MODEL_PROPERTIES_ARRAY = 'swagger/apiModelPropertiesArray';

/** The properties EventRecordDto documents in OpenAPI, in declaration order. */
function documentedKeys(): string[] {
  const keys = Reflect.getMetadata(API_MODEL_PROPERTIES_ARRAY, EventRecordDto.prototype) as string[];
  return keys.map((key) => key.replace(/^:/, ''));
}

describe('event fields', () => {
  it('EventRecordDto documents exactly the fields of the table, in record order', () => {
    expect(documentedKeys()).toEqual(EVENT_FIELDS.map((f) => f.name));
  });

  it('gives each field one name, one key and one column', () => {
    const unique = (values: string[]) => new Set(values).size === values.length;
    expect(unique(EVENT_FIELDS.map((f) => f.name))).toBe(true);
    expect(unique(EVENT_FIELDS.map((f) => keyOf(f)))).toBe(true);
    expect(unique(EVENT_FIELDS.map((f) => f.column))).toBe(true);
    for (const f of EVENT_FIELDS) expect(f.column).toMatch(/^[a-z_]+$/);
  });

  it('answers what other features ask of it: dimensions, columns, known fields, position', () => {
    expect(DIMENSION_FIELDS.map((f) => f.name)).toEqual([
      'eventName',
      'platform',
      'appVersion',
      'osVersion',
      'deviceModel',
      'locale',
    ]);
    expect(DIMENSION_FIELDS.every((f) => f.type === 'text')).toBe(true);
    expect(columnOf('deviceModel')).toBe('device_model');
    expect(eventField('payload').legacyColumn).toBe('payload');
    expect(POSITION_FIELDS.map((f) => f.name)).toEqual(['receivedAt', 'id']);
    // Everything an event brings but its effective time, which ingest computes.
    expect(SENT_FIELD_NAMES).toEqual(
      fieldsFrom('event').flatMap((f) => (f.name === 'timestamp' ? [] : [f.name])),
    );
    expect(fieldsFrom('request').map((f) => f.name)).toEqual(['appId', 'receivedAt']);
  });

  it('names each column once in EVENT_COLUMN, and each SDK place once, for sent text fields only', () => {
    expect(Object.keys(EVENT_COLUMN)).toEqual(EVENT_FIELDS.map((f) => f.name));
    expect(EVENT_COLUMN.anonymousUserId).toBe('anonymous_user_id');
    const posthog = WIRE_FIELDS.map((f) => f.wire.posthog);
    expect(new Set(posthog).size).toBe(posthog.length);
    for (const p of posthog) expect(p).toMatch(/^\$[a-z_]+$/);
    const segment = WIRE_FIELDS.flatMap((f) => f.wire.segment ?? []);
    expect(new Set(segment).size).toBe(segment.length);
    for (const f of WIRE_FIELDS) expect([f.type, 'sent' in f]).toEqual(['text', true]);
    expect(WIRE_FIELDS.filter((f) => f.wire.numberAsText).map((f) => f.name)).toEqual(['buildNumber']);
  });

  it('gives every type a binary array element but the stored id, which ingest never writes', () => {
    for (const f of EVENT_FIELDS) {
      expect(FIELD_TYPES[f.type].element === null).toBe(f.source === 'database');
    }
  });

  it('selects each field under its record name, the older payload only from events', () => {
    const events = eventRowColumns('events');
    for (const f of EVENT_FIELDS) expect(events).toContain(` AS "${f.name}"`);
    expect(events).toContain('coalesce(payload_json, payload::json) AS "payload"');
    expect(eventRowColumns('quarantine')).toContain('payload_json AS "payload"');
    expect(eventRowColumns('quarantine')).not.toContain('payload::json');
  });
});
