import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import request from 'supertest';
import { bearer, makeApiKey, makeTenant, postIngest } from './factories';
import { useTestApp } from './support/test-app';
import { runTestCli } from './support/run-cli';

const cli = runTestCli;

const dir = mkdtempSync(path.join(tmpdir(), 'tally-plans-'));
function file(name: string, content: string): string {
  const p = path.join(dir, name);
  writeFileSync(p, content);
  return p;
}

const PLAN = {
  mode: 'enforce',
  unplanned: 'reject',
  events: {
    'Checkout.completed': {
      payload: {
        type: 'object',
        required: ['plan'],
        properties: { plan: { type: 'string', enum: ['free', 'pro'] } },
      },
    },
  },
};

describe('CLI: tally plans and tally quarantine', () => {
  const t = useTestApp({ KEY_CACHE_TTL_MS: '0' });

  it('plans set, get and check; quarantine list and replay', async () => {
    const tenant = await makeTenant(t.app);
    const app = tenant.appId;
    const planFile = file('plan.json', JSON.stringify(PLAN));

    const empty = await cli('plans', 'get', '--app', app, '--json');
    expect(empty.json).toMatchObject({ appId: app, version: 0, mode: 'off' });

    const set = await cli('plans', 'set', '--app', app, '--file', planFile, '--json');
    expect(set.code).toBe(0);
    expect(set.json).toMatchObject({ version: 1, mode: 'enforce', unplanned: 'reject' });
    // The server applies it (a fresh compile: the CLI's NOTIFY, or no cached plan yet).
    const key = (await makeApiKey(t.app, [app], ['plans:read'])).key;
    const read = await request(t.http).get('/api/v1/plan').query({ appId: app }).set(bearer(key));
    expect(read.body.version).toBe(1);

    const stale = await cli('plans', 'set', '--app', app, '--file', planFile, '--if-match', '0');
    expect(stale.code).toBe(3);
    expect(stale.stderr).toMatch(/version 1, not 0/);

    const bad = await cli('plans', 'set', '--app', app, '--file', file('bad.json', '{"mode":"loud"}'));
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/mode: mode is required/);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);

    const events = [
      { eventName: 'Checkout.completed', payload: { plan: 'gold' } },
      { eventName: 'Checkout.completed', payload: { plan: 'gold' } },
      { eventName: 'Checkout.completed', payload: {} },
      { eventName: 'Checkout.completed', payload: { plan: 'pro' } },
      { eventName: 'checkout_completed' },
    ];
    const ndjson = file('events.ndjson', events.map((e) => JSON.stringify(e)).join('\n') + '\n');
    const check = await cli('plans', 'check', '--app', app, '--file', ndjson, '--json');
    expect(check.code).toBe(4);
    expect(check.json).toMatchObject({ received: 5, accepted: 1, rejected: 4 });
    expect(check.json.violations).toEqual([
      {
        eventName: 'Checkout.completed',
        field: 'payload.plan',
        rule: 'enum',
        code: 'schema_violation',
        severity: 'error',
        count: 2,
      },
      {
        eventName: 'Checkout.completed',
        field: 'payload.plan',
        rule: 'required',
        code: 'schema_violation',
        severity: 'error',
        count: 1,
      },
      {
        eventName: 'checkout_completed',
        field: 'eventName',
        rule: 'unplanned',
        code: 'unplanned_event',
        severity: 'error',
        count: 1,
      },
    ]);
    const text = await cli('plans', 'check', '--app', app, '--file', ndjson);
    expect(text.stdout).toMatch(/^EVENT\s+FIELD\s+RULE\s+SEVERITY\s+COUNT\n/);
    expect(text.stdout).toMatch(/Checkout\.completed\s+payload\.plan\s+enum\s+error\s+2/);
    expect(await t.db.query(`SELECT 1 FROM events WHERE app_id = $1`, [app])).toHaveLength(0);
    const loosePlan = file('loose.json', JSON.stringify({ mode: 'flag', events: {} }));
    const loose = await cli('plans', 'check', '--app', app, '--file', ndjson, '--plan', loosePlan, '--json');
    expect(loose.code).toBe(0);
    expect(loose.json).toMatchObject({ accepted: 5, rejected: 0 });

    await postIngest(t.http, tenant.liveKey, { events });
    const list = await cli('quarantine', 'list', '--app', app, '--json');
    expect(list.json).toHaveLength(4);
    expect(list.json[0]).toMatchObject({
      appId: app,
      code: expect.any(String),
      violations: expect.any(Array),
    });
    const listed = await cli('quarantine', 'list', '--app', app, '--code', 'unplanned_event');
    expect(listed.stdout).toMatch(/checkout_completed/);

    await cli('plans', 'set', '--app', app, '--file', file('allow.json', JSON.stringify({ mode: 'flag' })));
    const replay = await cli('quarantine', 'replay', '--app', app, '--json');
    expect(replay.json).toEqual({ replayed: 4, duplicates: 0, stillRejected: 0 });
    expect(await t.db.query(`SELECT 1 FROM events WHERE app_id = $1`, [app])).toHaveLength(5);
  });

  it('usage errors exit 2 with one line', async () => {
    const run = await cli('quarantine', 'list', '--app', 'nope');
    expect(run.code).toBe(2);
    const bad = await cli(
      'quarantine',
      'replay',
      '--app',
      '0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c',
      '--code',
      'x',
    );
    expect(bad.code).toBe(2);
    const missing = await cli(
      'plans',
      'check',
      '--app',
      '0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c',
      '--file',
      '/nonexistent',
    );
    expect(missing.code).toBe(2);
    expect(missing.stderr.trim().split('\n')).toHaveLength(1);
  });
});
