import request from 'supertest';
import { bearer, makeApiKey, makeApp, makeIngestKey, postIngest } from './factories';
import { runTestCli as cli } from './support/run-cli';
import { useTestApp } from './support/test-app';

describe('tally users delete and tally suppressions', () => {
  const t = useTestApp();
  let appId: string;
  let ingestKey: string;
  let readKey: string;

  beforeAll(async () => {
    appId = (await makeApp(t.app)).id;
    ingestKey = (await makeIngestKey(t.app, appId)).key;
    readKey = (await makeApiKey(t.app, [appId])).key;
    const events = ['cli-gone-1', 'cli-gone-2', 'cli-kept'].flatMap((user) =>
      [0, 1, 2, 3].map((k) => ({ eventName: 'Cli.test', anonymousUserId: user, eventId: `${user}-${k}` })),
    );
    expect((await postIngest(t.http, ingestKey, { events })).body.accepted).toBe(12);
  });

  it('--wait runs the deletion through the job and prints it done', async () => {
    const run = await cli(
      'users',
      'delete',
      '--app',
      appId,
      '--user',
      'cli-gone-1',
      '--user',
      'cli-gone-2',
      '--wait',
      '--json',
    );
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.json).toEqual(
      expect.objectContaining({
        appId,
        status: 'done',
        users: 2,
        suppress: true,
        eventsDeleted: 8,
        daysRecomputed: 1,
      }),
    );
    const events = await request(t.http).get(`/api/v1/events?appId=${appId}`).set(bearer(readKey));
    expect(events.body.map((e: { anonymousUserId: string }) => e.anonymousUserId)).toEqual(
      Array(4).fill('cli-kept'),
    );
  });

  it('lists the suppressions as hashes, and removes one', async () => {
    const list = await cli('suppressions', 'list', '--app', appId, '--json');
    expect(list.code).toBe(0);
    expect(list.json).toHaveLength(2);
    expect(list.json[0]).toEqual({
      appId,
      userHash: expect.stringMatching(/^[0-9a-f]{64}$/),
      createdAt: expect.any(String),
    });
    expect(list.stdout).not.toContain('cli-gone');

    const refused = await postIngest(t.http, ingestKey, {
      events: [{ eventName: 'Cli.test', anonymousUserId: 'cli-gone-1' }],
    });
    expect(refused.body.errorCounts).toEqual({ user_suppressed: 1 });

    const removed = await cli('suppressions', 'remove', '--app', appId, '--user', 'cli-gone-1', '--json');
    expect(removed.json).toEqual({ appId, removed: true });
    expect(
      (await cli('suppressions', 'remove', '--app', appId, '--user', 'cli-gone-1', '--json')).json,
    ).toEqual({
      appId,
      removed: false,
    });
    expect((await cli('suppressions', 'list', '--app', appId, '--json')).json).toHaveLength(1);
    // The server heard of it (LISTEN/NOTIFY); wait on the answer, not on a clock.
    for (;;) {
      const res = await postIngest(t.http, ingestKey, {
        events: [{ eventName: 'Cli.test', anonymousUserId: 'cli-gone-1' }],
      });
      if (res.body.accepted === 1) break;
      await new Promise((r) => setTimeout(r, 20));
    }
  });

  it('the audit log names the CLI user for each action, and no user id', async () => {
    const run = await cli('audit', 'list', '--app', appId, '--json');
    expect(run.code).toBe(0);
    const actions = run.json.map((e: { action: string }) => e.action);
    for (const a of ['deletion.requested', 'suppression.added', 'deletion.finished', 'suppression.removed']) {
      expect(actions).toContain(a);
    }
    expect(run.stdout).not.toContain('cli-gone');
  });

  it.each([
    [['users', 'delete', '--app', 'nope', '--user', 'u']],
    [['users', 'delete', '--user', 'u']],
    [['users', 'delete', '--app', '0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c']],
    [['suppressions', 'remove', '--app', '0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c']],
    [['suppressions', 'list']],
  ])('usage error (exit 2, one line): %j', async (argv) => {
    const run = await cli(...argv);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('an unknown app is refused (exit 3)', async () => {
    const run = await cli('users', 'delete', '--app', '0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c', '--user', 'u');
    expect(run.code).toBe(3);
  });
});
