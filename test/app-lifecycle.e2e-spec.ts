import request from 'supertest';
import type { DataSource } from 'typeorm';
import { bearer, makeApiKey, makeIngestKey, postIngest } from './factories';
import { readFile } from 'node:fs/promises';
import { testDatabaseUrl, testEnv, testLedgerPath, useTestApp, type TestApp } from './support/test-app';
import { openServices } from '@app/cli/services';
import { loadConfig } from '@app/config/config';
import { expectFailureStdout, runTestCli } from './support/run-cli';
import { RollupsService } from '@app/rollups/rollups.service';

const cli = runTestCli;

/** Every table with an `app_id` column, partitions left to their parent. */
async function appTables(db: DataSource): Promise<string[]> {
  const rows = (await db.query(
    `SELECT c.table_name AS name FROM information_schema.columns c
       JOIN pg_class k ON k.relname = c.table_name AND NOT k.relispartition
      WHERE c.column_name = 'app_id' AND c.table_schema = current_schema()
      ORDER BY 1`,
  )) as { name: string }[];
  return rows.map((r) => r.name);
}

/** Rows of `appId` per table (only the tables that have some). */
async function rowsOf(db: DataSource, appId: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const table of await appTables(db)) {
    const [row] = (await db.query(`SELECT count(*)::int AS n FROM ${table} WHERE app_id = $1`, [appId])) as {
      n: number;
    }[];
    if (row.n > 0) out[table] = row.n;
  }
  const [keys] = (await db.query(`SELECT count(*)::int AS n FROM keys WHERE $1::uuid = ANY (app_ids)`, [
    appId,
  ])) as { n: number }[];
  if (keys.n > 0) out.keys = keys.n;
  const [apps] = (await db.query(`SELECT count(*)::int AS n FROM apps WHERE id = $1`, [appId])) as {
    n: number;
  }[];
  if (apps.n > 0) out.apps = apps.n;
  return out;
}

/** An app with data in every kind of table: events, rollups, a plan, quarantine, a suppression. */
async function populated(t: TestApp, name: string) {
  const app = (await cli('apps', 'create', '--name', name, '--json')).json as { id: string };
  const ingest = await makeIngestKey(t.app, app.id);
  const admin = (
    await makeApiKey(t.app, [app.id], ['plans:read', 'plans:write', 'privacy:write', 'events:read'])
  ).key;
  const events = Array.from({ length: 40 }, (_, i) => ({
    eventName: i % 2 ? 'Screen.viewed' : 'App.opened',
    eventId: `${name}-${i}`,
    anonymousUserId: `u-${i % 5}`,
    payload: { n: i },
  }));
  expect((await postIngest(t.http, ingest.key, { events })).status).toBe(200);
  await request(t.http)
    .put('/api/v1/plan')
    .query({ appId: app.id })
    .set(bearer(admin))
    .set('If-Match', '*')
    .set('Content-Type', 'application/json')
    .send(JSON.stringify({ mode: 'enforce', unplanned: 'reject', events: { 'App.opened': {} } }))
    .expect(200);
  // Rejected by the plan: into the quarantine and the data-quality counts.
  await postIngest(t.http, ingest.key, { events: [{ eventName: 'Unplanned.one', anonymousUserId: 'u-9' }] });
  await request(t.http).get('/api/v1/plan/quality').query({ appId: app.id }).set(bearer(admin)).expect(200);
  const deletion = await request(t.http)
    .post('/api/v1/deletions')
    .set(bearer(admin))
    .set('Content-Type', 'application/json')
    .send(JSON.stringify({ appId: app.id, anonymousUserIds: ['u-4'] }));
  expect(deletion.status).toBe(202);
  // The user's deletion runs on this server (after its suppression settles): wait for its end, so
  // that the app's own deletion finds the 32 events of the other users.
  const deadline = Date.now() + 30_000;
  for (;;) {
    const got = await request(t.http).get(`/api/v1/deletions/${deletion.body.id}`).set(bearer(admin));
    if (got.body.status === 'done') break;
    if (Date.now() > deadline) throw new Error(`the user deletion is still ${got.body.status}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await t.app.get(RollupsService).compute({});
  return { appId: app.id, ingestKey: ingest.key, adminKey: admin };
}

describe('apps: rename and delete', () => {
  const t = useTestApp();

  it('renames an app, audited; an unknown app is refused (exit 3)', async () => {
    const app = (await cli('apps', 'create', '--name', 'Typo', '--json')).json as { id: string };
    const renamed = await cli('apps', 'rename', app.id, 'Fixed name', '--json');
    expect(renamed.code).toBe(0);
    expect(renamed.json).toMatchObject({ id: app.id, name: 'Fixed name' });
    const list = (await cli('apps', 'list', '--json')).json as { id: string; name: string }[];
    expect(list.find((a) => a.id === app.id)?.name).toBe('Fixed name');
    const audit = (await cli('audit', 'list', '--app', app.id, '--json')).json as { action: string }[];
    expect(audit.map((e) => e.action)).toContain('app.renamed');
    const unknown = await cli('apps', 'rename', '00000000-0000-4000-8000-000000000000', 'x', '--json');
    expect(unknown.code).toBe(3);
    expectFailureStdout(unknown, 'not_found');
    const blank = await cli('apps', 'rename', app.id, '  ', '--json');
    expect(blank.code).toBe(2);
  });

  it('refuses to delete without --yes when there is no terminal, and changes nothing', async () => {
    const app = (await cli('apps', 'create', '--name', 'Kept', '--json')).json as { id: string };
    const run = await cli('apps', 'delete', app.id, '--json');
    expect(run.code).toBe(2);
    expectFailureStdout(run, 'usage');
    expect(run.stderr).toMatch(/--yes/);
    expect(await rowsOf(t.db, app.id)).toEqual({ apps: 1, audit_log: 1 });
  });

  it('revokes the keys at once, then erases every row of the app in every table, and leaves other apps alone', async () => {
    const gone = await populated(t, 'doomed');
    const kept = await populated(t, 'kept');
    const both = (await makeApiKey(t.app, [gone.appId, kept.appId], ['events:read'])).key;
    const before = await rowsOf(t.db, gone.appId);
    // Every kind of table holds rows of it before.
    expect(Object.keys(before)).toEqual(
      expect.arrayContaining([
        'events',
        'rollups',
        'quarantine',
        'tracking_plans',
        'user_suppressions',
        'keys',
      ]),
    );
    const keptBefore = await rowsOf(t.db, kept.appId);

    const requested = await cli('apps', 'delete', gone.appId, '--yes', '--json');
    expect(requested.code).toBe(0);
    expect(requested.json).toMatchObject({ appId: gone.appId, kind: 'app', status: 'pending' });
    // At once: its keys are refused, a key of both apps no longer reaches it, and it is listed nowhere.
    expect((await postIngest(t.http, gone.ingestKey, { events: [{ eventName: 'Late' }] })).status).toBe(401);
    const read = await request(t.http).get('/api/v1/events').query({ appId: gone.appId }).set(bearer(both));
    expect(read.status).toBe(403);
    const other = await request(t.http).get('/api/v1/events').query({ appId: kept.appId }).set(bearer(both));
    expect(other.status).toBe(200);
    const list = (await cli('apps', 'list', '--json')).json as { id: string }[];
    expect(list.map((a) => a.id)).not.toContain(gone.appId);
    expect((await cli('keys', 'create-ingest', '--app', gone.appId, '--json')).code).toBe(3);

    // The job, as a server would run it.
    const done = await cli('apps', 'delete', gone.appId, '--yes', '--json');
    expect(done.code).toBe(3);
    const privacy = await runPending(t, requested.json.id as string);
    expect(privacy).toMatchObject({ status: 'done', eventsDeleted: 32 });

    const after = await rowsOf(t.db, gone.appId);
    // Only the audit log (append-only: it records the deletion) and the deletion's own record.
    expect(after).toEqual({ audit_log: expect.any(Number), deletions: 1 });
    expect(await rowsOf(t.db, kept.appId)).toEqual(keptBefore);
    const audit = (await cli('audit', 'list', '--app', gone.appId, '--json')).json as { action: string }[];
    expect(audit.map((e) => e.action)).toEqual(
      expect.arrayContaining(['app.deletion_requested', 'deletion.finished']),
    );
  });

  it('--wait runs the deletion to its end in the command', async () => {
    const gone = await populated(t, 'waited');
    const run = await cli('apps', 'delete', gone.appId, '--yes', '--wait', '--json');
    expect(run.code).toBe(0);
    expect(run.json).toMatchObject({ appId: gone.appId, kind: 'app', status: 'done', eventsDeleted: 32 });
    // The erasure ledger has it too, so that a restored backup never brings the app's data back.
    const ledger = (await readFile(testLedgerPath(testDatabaseUrl()), 'utf8')).trim().split('\n');
    expect(ledger.map((line) => JSON.parse(line) as Record<string, unknown>)).toContainEqual(
      expect.objectContaining({ deletionId: run.json.id, appId: gone.appId, kind: 'app', userHashes: [] }),
    );
    expect(await rowsOf(t.db, gone.appId)).toEqual({ audit_log: expect.any(Number), deletions: 1 });
  });
});

/** Runs a stored deletion to its end through the CLI's own job, as `--wait` does. */
async function runPending(_t: TestApp, id: string) {
  const services = await openServices(loadConfig(testEnv()), ['privacy']);
  try {
    return await services.privacy().runToEnd(id);
  } finally {
    await services.close();
  }
}
