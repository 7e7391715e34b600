import { Client } from 'pg';
import { EVENT_FIELDS, FIELD_TYPES } from '@app/common/events/event-fields';
import { loadConfig } from '@app/config/config';
import { prepareDatabase } from '@app/database/prepare';
import { testDatabaseUrl, testEnv } from './support/test-app';

// The field table (src/common/events/event-fields.ts) against the schema the migrations build:
// every field's column, SQL type and nullability, in `events` and in `quarantine`.

interface ColumnInfo {
  column_name: string;
  data_type: string;
  is_nullable: 'YES' | 'NO';
}

/** What the table says each column of a stored event is. */
const expected = EVENT_FIELDS.map((f) => ({
  column_name: f.column,
  data_type: FIELD_TYPES[f.type].sql,
  is_nullable: f.nullable ? 'YES' : 'NO',
}));

describe('the stored event field table', () => {
  const db = new Client({ connectionString: testDatabaseUrl() });
  beforeAll(async () => {
    await prepareDatabase(loadConfig(testEnv()), { migrate: true });
    await db.connect();
  });
  afterAll(() => db.end());

  async function columnsOf(table: string): Promise<Map<string, ColumnInfo>> {
    const { rows } = await db.query<ColumnInfo>(
      `SELECT column_name, data_type, is_nullable FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = $1`,
      [table],
    );
    return new Map(rows.map((r) => [r.column_name, r]));
  }

  it('names every column of events, with its type and nullability; the older payload column besides', async () => {
    const columns = await columnsOf('events');
    expect(expected.map((e) => columns.get(e.column_name) ?? e.column_name)).toEqual(expected);
    const legacy = EVENT_FIELDS.flatMap((f) => ('legacyColumn' in f ? [f.legacyColumn] : []));
    expect(legacy).toEqual(['payload']);
    expect(columns.get('payload')).toEqual({
      column_name: 'payload',
      data_type: 'jsonb',
      is_nullable: 'YES',
    });
    expect([...columns.keys()].sort()).toEqual([...expected.map((e) => e.column_name), ...legacy].sort());
  });

  it('names every column of quarantine, with its type and nullability; the code and violations besides', async () => {
    const columns = await columnsOf('quarantine');
    expect(expected.map((e) => columns.get(e.column_name) ?? e.column_name)).toEqual(expected);
    expect([...columns.keys()].sort()).toEqual(
      [...expected.map((e) => e.column_name), 'code', 'violations'].sort(),
    );
  });
});
