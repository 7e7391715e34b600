import type { AcceptedEvent } from './ingest.types';
import { columnArrays, INGEST_COLUMNS } from './ingest-columns';
import { INSERT_ROWS } from './ingest.repository';

/** pg_type oids of the types the statement casts its arrays to. */
const OID_OF_SQL_TYPE: Record<string, number> = {
  uuid: 2950,
  timestamptz: 1184,
  text: 25,
  bigint: 20,
  boolean: 16,
  float8: 701,
  json: 114,
};

function event(over: Partial<AcceptedEvent>): AcceptedEvent {
  return {
    index: 0,
    eventId: null,
    eventName: 'opened',
    anonymousUserId: null,
    sessionId: null,
    eventTime: null,
    ts: 1_700_000_000_000,
    isTestMode: false,
    platform: null,
    appVersion: null,
    buildNumber: null,
    osVersion: null,
    deviceModel: null,
    locale: null,
    timezone: null,
    floatValue: null,
    payload: null,
    ...over,
  };
}

/** The `unnest` of the input rows: its `$k::type[]` parameters and the column names it gives them. */
function inputUnnest() {
  const match = /unnest\(([^)]*)\) WITH ORDINALITY AS t\(([^)]*)\)/.exec(INSERT_ROWS);
  if (!match) throw new Error('no input unnest in INSERT_ROWS');
  const params = match[1].split(',').map((p) => {
    const [, k, type] = /^\s*\$(\d+)::(\w+)\[\]\s*$/.exec(p)!;
    return { k: Number(k), type };
  });
  return { params, names: match[2].split(',').map((s) => s.trim()) };
}

/** The elements of a binary text array, decoded (null stays null). */
function textElements(array: Buffer): (string | null)[] {
  const out: (string | null)[] = [];
  let o = 20;
  for (let i = 0; i < array.readInt32BE(12); i++) {
    const len = array.readInt32BE(o);
    o += 4;
    out.push(len < 0 ? null : array.toString('utf8', o, o + len));
    if (len > 0) o += len;
  }
  return out;
}

describe('ingest columns', () => {
  const rows = {
    batches: [
      { appId: '00000000-0000-4000-8000-000000000001', receivedAt: 1_700_000_001_000 },
      { appId: '00000000-0000-4000-8000-000000000002', receivedAt: 1_700_000_002_000 },
    ],
    events: [
      event({ eventId: 'a', eventName: 'opened', platform: 'ios', payload: { plan: 'pro' } }),
      event({ eventName: 'closed', sessionId: 's1', locale: 'de-DE' }),
      event({ eventId: 'c', eventName: 'paid', appVersion: '2.1', timezone: 'Europe/Berlin' }),
    ],
    batchOf: [0, 0, 1],
  };

  it('builds the statement with one array parameter per column, in order, then the five others', () => {
    const { params, names } = inputUnnest();
    expect(params.map((p) => p.k)).toEqual(INGEST_COLUMNS.map((_, k) => k + 1));
    expect(names).toEqual([...INGEST_COLUMNS.map((c) => c.name), 'n']);
    const n = INGEST_COLUMNS.length;
    expect(INSERT_ROWS).toContain(`EXCLUDED.seen_at - d.seen_at > $${n + 1}::bigint * interval`);
    expect(INSERT_ROWS).toContain(`unnest($${n + 2}::uuid[], $${n + 3}::text[], $${n + 4}::text[])`);
    expect(INSERT_ROWS).toContain(`tally_ingest_in_time($${n + 5}::bigint)`);
    expect(INSERT_ROWS).not.toContain(`$${n + 6}`);
  });

  it('has a column per stored field but the id, in the order, names and types of EVENT_FIELDS', () => {
    expect(inputUnnest().params.map((p) => `$${p.k}::${p.type}[]`)).toEqual(
      [
        '$1::uuid[] $2::text[] $3::text[] $4::text[] $5::bigint[] $6::timestamptz[] $7::timestamptz[]',
        '$8::text[] $9::boolean[] $10::text[] $11::text[] $12::text[] $13::text[] $14::text[]',
        '$15::text[] $16::text[] $17::float8[] $18::json[]',
      ]
        .join(' ')
        .split(' '),
    );
    expect(inputUnnest().names.join(' ')).toBe(
      'app_id event_name anonymous_user_id session_id event_time ts received_at event_id is_test_mode ' +
        'platform app_version build_number os_version device_model locale timezone float_value payload_json n',
    );
  });

  it('stores every input column in events under its name, payload as payload_json', () => {
    const [, columns, values] = /INSERT INTO events \(([^)]*)\)\s+SELECT ([^\n]*)\n/.exec(INSERT_ROWS)!;
    const stored = columns.split(', ');
    expect(stored).toHaveLength(INGEST_COLUMNS.length);
    expect(stored).toContain('payload_json');
    expect(stored).not.toContain('payload');
    expect(stored).toEqual(INGEST_COLUMNS.map((c) => c.name));
    expect(values.split(', ')).toEqual(INGEST_COLUMNS.map((c) => `i.${c.name}`));
  });

  it('builds one array per statement parameter, with its type and one element per row', () => {
    const arrays = columnArrays(rows);
    const { params } = inputUnnest();
    expect(arrays).toHaveLength(params.length);
    arrays.forEach((array, k) => {
      expect({ k: k + 1, oid: array.readInt32BE(8) }).toEqual({
        k: params[k].k,
        oid: OID_OF_SQL_TYPE[params[k].type],
      });
      expect(array.readInt32BE(12)).toBe(rows.events.length);
    });
  });

  it('puts each text field in the array of the column the statement names after it', () => {
    const arrays = columnArrays(rows);
    const { names } = inputUnnest();
    const column = (name: string) => textElements(arrays[names.indexOf(name)]);
    expect(column('event_id')).toEqual(['a', null, 'c']);
    expect(column('event_name')).toEqual(['opened', 'closed', 'paid']);
    expect(column('session_id')).toEqual([null, 's1', null]);
    expect(column('platform')).toEqual(['ios', null, null]);
    expect(column('app_version')).toEqual([null, null, '2.1']);
    expect(column('locale')).toEqual([null, 'de-DE', null]);
    expect(column('timezone')).toEqual([null, null, 'Europe/Berlin']);
    // json's binary form is its text.
    expect(column('payload_json')).toEqual(['{"plan":"pro"}', null, null]);
  });

  it('writes the app of each row from its batch', () => {
    const arrays = columnArrays(rows);
    const apps = arrays[inputUnnest().names.indexOf('app_id')];
    const uuidAt = (i: number) => apps.subarray(20 + i * 20 + 4, 20 + i * 20 + 20).toString('hex');
    expect([0, 1, 2].map(uuidAt)).toEqual([
      '00000000000040008000000000000001',
      '00000000000040008000000000000001',
      '00000000000040008000000000000002',
    ]);
  });
});
