import { Client } from 'pg';
import { BinaryArrayWriter, ElementType, uuidBytes } from '@app/database/binary-arrays';
import { testDatabaseUrl } from './support/test-app';

// The ingest statement sends its arrays in PostgreSQL's binary format. Each element type is read
// back by PostgreSQL itself here, with the values that are easy to get wrong.

describe('binary array parameters', () => {
  const db = new Client({ connectionString: testDatabaseUrl() });
  beforeAll(() => db.connect());
  afterAll(() => db.end());

  /** Sends the writer's arrays as $1…$n and returns what PostgreSQL made of them, as text. */
  async function echo(casts: string[], w: BinaryArrayWriter): Promise<(string | null)[][]> {
    const values = w.finish();
    const columns = casts.map(
      (cast, i) =>
        `(SELECT array_agg(v::text ORDER BY n) FROM unnest($${i + 1}::${cast}[]) WITH ORDINALITY AS t(v, n))`,
    );
    const { rows } = await db.query<{ a: (string | null)[] }>(
      `SELECT unnest(ARRAY[${columns.map((c) => `to_jsonb(${c})`).join(', ')}]) AS a`,
      values,
    );
    return rows.map((r) => r.a);
  }

  it('text: quotes, backslashes, braces, commas, the word NULL, empty, non-ASCII, long', async () => {
    const texts = [
      'plain',
      'a "quoted" \\ back\\slash',
      '{braces}, commas',
      'NULL',
      '',
      'héllo wörld ✓',
      'emoji 🎉 and 中文',
      'x'.repeat(63) + 'é',
      'ü'.repeat(300),
      null,
    ];
    const w = new BinaryArrayWriter(8);
    w.begin(ElementType.text, texts.length);
    for (const t of texts) w.text(t);
    w.end();
    expect(await echo(['text'], w)).toEqual([texts]);
  });

  it('numbers, booleans, timestamps, uuids and json', async () => {
    const w = new BinaryArrayWriter(8);
    const ints = [0, 1, -1, 1_763_000_000_123, -1_763_000_000_123, 2 ** 53 - 1, -(2 ** 53 - 1), null];
    w.begin(ElementType.int8, ints.length);
    for (const n of ints) w.int8(n);
    w.end();
    const floats = [0, -2.5, 0.1, 1e-300, 1.7976931348623157e308, null];
    w.begin(ElementType.float8, floats.length);
    for (const n of floats) w.float8(n);
    w.end();
    w.begin(ElementType.bool, 3).bool(true).bool(false).bool(null).end();
    const times = [0, 946_684_800_000, 1_763_000_000_123, null];
    w.begin(ElementType.timestamptz, times.length);
    for (const t of times) w.timestamptz(t);
    w.end();
    const ids = ['00000000-0000-0000-0000-000000000000', 'F81D4FAE-7DEC-11D0-A765-00A0C91E6BF6'];
    w.begin(ElementType.uuid, ids.length);
    for (const id of ids) w.uuid(uuidBytes(id));
    w.end();
    const docs = ['{"a":1,"b":"é \\"x\\"","c":true}', null];
    w.begin(ElementType.json, docs.length);
    for (const d of docs) w.json(d);
    w.end();

    await db.query(`SET TIME ZONE 'UTC'`);
    const [i, f, b, t, u, j] = await echo(['int8', 'float8', 'bool', 'timestamptz', 'uuid', 'json'], w);
    expect(i).toEqual(ints.map((n) => (n === null ? null : String(n))));
    expect(f!.map((x) => (x === null ? null : Number(x)))).toEqual(floats);
    expect(b).toEqual(['true', 'false', null]);
    expect(t).toEqual([
      '1970-01-01 00:00:00+00',
      '2000-01-01 00:00:00+00',
      '2025-11-13 02:13:20.123+00',
      null,
    ]);
    expect(u).toEqual(ids.map((id) => id.toLowerCase()));
    expect(j).toEqual(docs);
  });

  it('json: kept as written, checked by PostgreSQL', async () => {
    // Key order, spacing and a key jsonb would sort or merge are all kept.
    const docs = ['{"z":1,"a":"é \\"x\\" ✓","m":[true,null]}', '{"b": 2.50, "b": 3}', null];
    const w = new BinaryArrayWriter(8).begin(ElementType.json, docs.length);
    for (const d of docs) w.json(d);
    w.end();
    expect(await echo(['json'], w)).toEqual([docs]);

    const bad = new BinaryArrayWriter().begin(ElementType.json, 1).json('{"a":').end();
    await expect(db.query('SELECT $1::json[]', bad.finish())).rejects.toThrow(
      /invalid input syntax for type json/,
    );
  });

  it('refuses an element type other than the statement says', async () => {
    const w = new BinaryArrayWriter().begin(ElementType.int8, 1).int8(1).end();
    await expect(db.query('SELECT $1::text[]', w.finish())).rejects.toThrow(
      /array element type 20 \(bigint\) instead of expected 25 \(text\)/,
    );
  });

  it('refuses misuse: a new array before the last ended, a malformed uuid', () => {
    const w = new BinaryArrayWriter().begin(ElementType.text, 1);
    expect(() => w.begin(ElementType.text, 1)).toThrow(/end\(\) the previous array/);
    expect(() => uuidBytes('not-a-uuid')).toThrow(/not a uuid/);
  });
});
