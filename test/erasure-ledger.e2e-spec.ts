import { randomUUID } from 'node:crypto';
import { appendFile, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import request from 'supertest';
import { DAY_MS } from '@app/common/time';
import { RollupsService } from '@app/rollups/rollups.service';
import { SuppressionsService } from '@app/privacy/suppressions.service';
import { bearer, makeApiKey, makeApp, makeIngestKey, postIngest } from './factories';
import { otherDatabase, recreateDatabase } from './support/databases';
import { startTestApp, TestApp } from './support/test-app';

const UNTHROTTLED = {
  INGEST_RATE_REQUESTS: '1000000',
  INGEST_RATE_EVENTS: '100000000',
  READ_RATE_REQUESTS: '1000000',
  AUTH_FAILURE_LIMIT: '1000000',
};

const ERASED = 'Ledger.Erased@Example.com';
const KEPT = ['kept-1', 'kept-2'];

function events(now: number, prefix: string) {
  return [ERASED, ...KEPT].flatMap((user, u) =>
    [0, 1, 2].map((d) => ({
      eventId: `${prefix}-${u}-${d}`,
      eventName: 'Ledger.tested',
      anonymousUserId: user,
      sessionId: `s-${u}-${d}`,
      eventTime: now - d * DAY_MS - u * 60_000,
      floatValue: u + d,
    })),
  );
}

describe('the erasure ledger (ERASURE_LEDGER_PATH)', () => {
  const ledgerPath = path.join(tmpdir(), `tally-ledger-e2e-${randomUUID()}.ndjson`);
  const lines: string[] = [];
  let t: TestApp;
  let appId: string;
  let ingestKey: string;
  let privacyKey: string;
  let stored: string;
  let deletionId: string;
  const now = Date.now();

  // A database of its own: the deletion runner takes pending deletions of every app it can see,
  // and the shared test database holds other files' deletions, which would land in this ledger.
  const databaseUrl = otherDatabase('tally_erasure_ledger');
  const start = async () =>
    startTestApp(
      { ...UNTHROTTLED, DATABASE_URL: databaseUrl, ERASURE_LEDGER_PATH: ledgerPath, LOG_LEVEL: 'warn' },
      { logDestination: { write: (l: string) => lines.push(l) } },
    );

  async function userEvents(user: string): Promise<number> {
    const [row] = (await t.db.query(
      `SELECT count(*)::int AS n FROM events WHERE app_id = $1 AND anonymous_user_id = $2`,
      [appId, user],
    )) as { n: number }[];
    return row.n;
  }

  async function rollupRows() {
    return (await t.db.query(
      `SELECT day::text, is_test_mode, event_name, events::int, unique_users::int, fv_count::int, fv_sum
         FROM rollups WHERE app_id = $1 ORDER BY day, is_test_mode, event_name`,
      [appId],
    )) as unknown[];
  }

  /** What the database holds of the app and its deletions, to compare two starts. */
  async function state() {
    const [counts] = (await t.db.query(
      `SELECT (SELECT count(*)::int FROM events WHERE app_id = $1) AS events,
              (SELECT count(*)::int FROM user_suppressions WHERE app_id = $1) AS suppressions,
              (SELECT count(*)::int FROM deletions WHERE app_id = $1) AS deletions,
              (SELECT count(*)::int FROM audit_log WHERE app_id = $1) AS audit`,
      [appId],
    )) as unknown[];
    return { counts, rollups: await rollupRows(), ledger: await readFile(ledgerPath, 'utf8') };
  }

  beforeAll(async () => {
    await recreateDatabase('tally_erasure_ledger');
    t = await start();
    appId = (await makeApp(t.app)).id;
    ingestKey = (await makeIngestKey(t.app, appId)).key;
    privacyKey = (await makeApiKey(t.app, [appId], ['privacy:write'])).key;
    const res = await postIngest(t.http, ingestKey, { events: events(now, 'ev') });
    expect(res.status).toBe(200);
    expect(res.body.accepted).toBe(9);
    await t.app.get(RollupsService).compute({ appId });
    stored = (await t.app.get(SuppressionsService).storedUserIds(appId, [ERASED]))[0];
  });

  afterAll(async () => {
    await t?.close();
    await t?.db.query(`DROP TABLE IF EXISTS ledger_e2e_lost`).catch(() => undefined);
    await rm(ledgerPath, { force: true });
  });

  it('appends each deletion, pseudonyms only, before it is done', async () => {
    await t.db.query(
      `CREATE TABLE ledger_e2e_lost AS SELECT * FROM events WHERE app_id = $1 AND anonymous_user_id = $2`,
      [appId, stored],
    );
    const res = await request(t.http)
      .post('/api/v1/deletions')
      .set(bearer(privacyKey))
      .set('Content-Type', 'application/json')
      .send({ appId, anonymousUserIds: [ERASED] });
    expect(res.status).toBe(202);
    deletionId = res.body.id;
    for (;;) {
      const got = await request(t.http).get(`/api/v1/deletions/${deletionId}`).set(bearer(privacyKey));
      expect(got.status).toBe(200);
      if (got.body.status === 'done') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const text = await readFile(ledgerPath, 'utf8');
    expect(text.endsWith('\n')).toBe(true);
    expect(text).not.toContain(ERASED);
    expect(text.toLowerCase()).not.toContain(ERASED.toLowerCase());
    // Pseudonyms only: not the id as sent, nor as stored.
    expect(text).not.toContain(stored);
    const [hash] = await t.app.get(SuppressionsService).hashesOf(appId, [stored]);
    expect(JSON.parse(text.trim())).toEqual({
      deletionId,
      appId,
      kind: 'users',
      at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      userHashes: [hash],
      suppress: true,
      requestedBy: { type: 'api_key', keyId: expect.any(String) },
    });
    expect(await userEvents(stored)).toBe(0);
  });

  it('re-applies a deletion the database lost, before the service serves', async () => {
    const afterDeletion = await rollupRows();
    // The database loses the deletion, as a backup taken before it would: the events, their
    // rollups, the suppression and the deletion's own row come back.
    await t.db.query(`INSERT INTO events SELECT * FROM ledger_e2e_lost`);
    await t.db.query(`DELETE FROM deletions WHERE id = $1`, [deletionId]);
    await t.db.query(`DELETE FROM user_suppressions WHERE app_id = $1`, [appId]);
    await t.app.get(RollupsService).compute({ appId });
    expect(await userEvents(stored)).toBe(3);
    expect(await rollupRows()).not.toEqual(afterDeletion);
    await t.close();
    t = await start();
    expect(await userEvents(stored)).toBe(0);
    expect(await rollupRows()).toEqual(afterDeletion);
    const got = await request(t.http).get(`/api/v1/deletions/${deletionId}`).set(bearer(privacyKey));
    expect(got.status).toBe(200);
    expect(got.body).toEqual(
      expect.objectContaining({ id: deletionId, status: 'done', users: 1, suppress: true, eventsDeleted: 3 }),
    );
    const later = await postIngest(t.http, ingestKey, {
      events: [{ ...events(now, 'later')[0], eventTime: now }],
    });
    expect(later.status).toBe(200);
    expect(later.body.accepted).toBe(0);
    expect(later.body.errors).toEqual([expect.objectContaining({ index: 0, code: 'user_suppressed' })]);
    expect(await userEvents(stored)).toBe(0);
  });

  it('re-applying again changes nothing', async () => {
    const before = await state();
    await t.close();
    t = await start();
    expect(await state()).toEqual(before);
    expect((await readFile(ledgerPath, 'utf8')).trim().split('\n')).toHaveLength(1);
  });

  it('skips, with a warning, a line of an unknown app and a torn last line', async () => {
    const unknownApp = randomUUID();
    const foreign = {
      deletionId: randomUUID(),
      appId: unknownApp,
      kind: 'users',
      at: new Date().toISOString(),
      userHashes: ['0'.repeat(64)],
      suppress: true,
      requestedBy: { type: 'cli', osUser: 'ops' },
    };
    await appendFile(ledgerPath, `${JSON.stringify(foreign)}\n{"deletionId":"${randomUUID()}","app`);
    const before = await state();
    await t.close();
    lines.length = 0;
    t = await start();
    expect(await state()).toEqual(before);
    const [row] = (await t.db.query(`SELECT count(*)::int AS n FROM deletions WHERE id = $1`, [
      foreign.deletionId,
    ])) as { n: number }[];
    expect(row.n).toBe(0);
    const warnings = lines.map((l) => JSON.parse(l) as { msg: string });
    expect(warnings.map((w) => w.msg)).toEqual(
      expect.arrayContaining([
        `deletion ${foreign.deletionId}: app ${unknownApp} is unknown here, entry skipped`,
        expect.stringMatching(/:3: torn last line, skipped$/),
      ]),
    );
    expect(lines.join('\n')).not.toContain('someone');

    // The next deletion is appended on a line of its own after the torn one.
    const res = await request(t.http)
      .post('/api/v1/deletions')
      .set(bearer(privacyKey))
      .set('Content-Type', 'application/json')
      .send({ appId, anonymousUserIds: [KEPT[0]], suppress: false });
    expect(res.status).toBe(202);
    for (;;) {
      const got = await request(t.http).get(`/api/v1/deletions/${res.body.id}`).set(bearer(privacyKey));
      if (got.body.status === 'done') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const text = (await readFile(ledgerPath, 'utf8')).split('\n');
    expect(JSON.parse(text[3])).toEqual(
      expect.objectContaining({ deletionId: res.body.id, suppress: false }),
    );
  });
});
