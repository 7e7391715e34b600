import request from 'supertest';
import { bearer, makeApiKey, makeTenant, postIngest } from './factories';
import { useTestApp, type TestApp } from './support/test-app';
import { expectProblem } from './support/problem';
import { userKey } from '@app/common/user-keys';

const RAW = 'person-raw-id-4711';

async function userKeySecret(t: TestApp): Promise<Buffer> {
  const [row] = (await t.db.query(`SELECT value FROM server_secrets WHERE name = 'user_key'`)) as {
    value: Buffer;
  }[];
  return row.value;
}

/** Asks for the deletion and waits, on the record's own status, until the server has run it. */
async function erased(
  t: TestApp,
  appId: string,
  key: string,
  users: string[],
): Promise<Record<string, unknown>> {
  const res = await request(t.http)
    .post('/api/v1/deletions')
    .set(bearer(key))
    .set('Content-Type', 'application/json')
    .send(JSON.stringify({ appId, anonymousUserIds: users, suppress: false }));
  expect(res.status).toBe(202);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const got = await request(t.http)
      .get(`/api/v1/deletions/${res.body.id as string}`)
      .set(bearer(key));
    if (got.body.status === 'done') return got.body as Record<string, unknown>;
    if (Date.now() > deadline) throw new Error(`deletion still ${got.body.status as string}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** The app's exported records, once the export horizon (EXPORT_SETTLE_MS) has passed all `n` of them. */
async function exported(
  t: TestApp,
  appId: string,
  key: string,
  n: number,
): Promise<Record<string, unknown>[]> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const res = await request(t.http).get('/api/v1/export').query({ appId, from: 0 }).set(bearer(key));
    expect(res.status).toBe(200);
    const records = res.text
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    if (records.length >= n || Date.now() > deadline) return records;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('the deletions feed gives downstream copies the userKeys to delete', () => {
  // The export horizon at its shortest, so that the events are exportable at once.
  const t = useTestApp({ EXPORT_SETTLE_MS: '200' });

  it('lists each done deletion with its users’ keys to an export key, and never a raw id', async () => {
    const s = await makeTenant(t.app);
    const privacy = (await makeApiKey(t.app, [s.appId], ['privacy:write'])).key;
    const exporter = (await makeApiKey(t.app, [s.appId], ['events:export'])).key;
    const events = [RAW, 'someone-else'].map((u, i) => ({
      eventName: 'Feed.seen',
      eventId: `f-${i}`,
      anonymousUserId: u,
    }));
    expect((await postIngest(t.http, s.liveKey, { events })).status).toBe(200);
    // The warehouse's copy: each record with its userKey, never matched to a raw id by Tally.
    const copy = await exported(t, s.appId, exporter, 2);
    const copied = copy.find((r) => r.anonymousUserId === RAW)!;
    const before = Date.now();
    const done = await erased(t, s.appId, privacy, [RAW]);
    const expected = userKey(await userKeySecret(t), s.appId, RAW);
    expect(done.userKeys).toEqual([expected]);
    expect(copied.userKey).toBe(expected);
    expect(copy.find((r) => r.anonymousUserId !== RAW)!.userKey).not.toBe(expected);

    const feed = await request(t.http)
      .get('/api/v1/deletions')
      .query({ appId: s.appId, since: String(before) })
      .set(bearer(exporter));
    expect(feed.status).toBe(200);
    expect(feed.body).toEqual([
      expect.objectContaining({ id: done.id, status: 'done', userKeys: [expected] }),
    ]);
    expect(feed.text).not.toContain(RAW);
    // An ISO `since` is the same instant; one after the deletion's end lists nothing.
    const iso = await request(t.http)
      .get('/api/v1/deletions')
      .query({ appId: s.appId, since: new Date(before).toISOString() })
      .set(bearer(exporter));
    expect(iso.body.map((d: { id: string }) => d.id)).toEqual([done.id]);
    const later = await request(t.http)
      .get('/api/v1/deletions')
      .query({ appId: s.appId, since: String(Date.now() + 60_000) })
      .set(bearer(exporter));
    expect(later.body).toEqual([]);
  });

  it('keys of the same user differ between apps, and a pending deletion shows none', async () => {
    const secret = await userKeySecret(t);
    const a = await makeTenant(t.app);
    const b = await makeTenant(t.app);
    expect(userKey(secret, a.appId, RAW)).not.toBe(userKey(secret, b.appId, RAW));
    expect(userKey(secret, a.appId, RAW)).toMatch(/^[A-Za-z0-9_-]{22}$/);
    const privacy = (await makeApiKey(t.app, [a.appId], ['privacy:write'])).key;
    const pending = await request(t.http)
      .post('/api/v1/deletions')
      .set(bearer(privacy))
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ appId: a.appId, anonymousUserIds: ['x'], suppress: true }));
    expect(pending.status).toBe(202);
    expect(pending.body.userKeys).toBeUndefined();
  });

  it('refuses a bad since (400), a key without either scope (403), and the record itself to an export key (403)', async () => {
    const s = await makeTenant(t.app);
    const exporter = (await makeApiKey(t.app, [s.appId], ['events:export'])).key;
    const bad = await request(t.http)
      .get('/api/v1/deletions')
      .query({ appId: s.appId, since: 'yesterday' })
      .set(bearer(exporter));
    expectProblem(bad, 400, 'invalid_query');
    expect(bad.body.errors).toEqual([expect.objectContaining({ field: 'since' })]);
    const reader = await request(t.http)
      .get('/api/v1/deletions')
      .query({ appId: s.appId })
      .set(bearer(s.apiKey));
    expectProblem(reader, 403, 'insufficient_scope');
    expect(reader.body.detail).toBe('The key lacks the scope privacy:write or events:export.');
    const post = await request(t.http)
      .post('/api/v1/deletions')
      .set(bearer(exporter))
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ appId: s.appId, anonymousUserIds: ['x'] }));
    expectProblem(post, 403, 'insufficient_scope');
  });
});
