import request from 'supertest';
import { KeysService } from '@app/auth/keys.service';
import { KeyVerifier } from '@app/auth/key-verifier';
import { TEST_ACTOR, bearer, makeApiKey, makeApp, makeIngestKey, makeTenant } from './factories';
import { useTestApp } from './support/test-app';
import { expectProblem } from './support/problem';

const INVALID = 'Bearer realm="tally", error="invalid_token"';

describe('authentication and authorization', () => {
  const t = useTestApp({ AUTH_FAILURE_LIMIT: '1000' });
  let tenant: Awaited<ReturnType<typeof makeTenant>>;

  beforeAll(async () => {
    tenant = await makeTenant(t.app);
  });

  const ingest = (headers: Record<string, string>) =>
    request(t.http)
      .post('/api/ingest')
      .set(headers)
      .set('Content-Type', 'application/json')
      .send({ events: [{ eventName: 'App.opened' }] });
  const events = (headers: Record<string, string>, appId = tenant.appId) =>
    request(t.http).get('/api/v1/events').query({ appId }).set(headers);
  const rollups = (headers: Record<string, string>, appId = tenant.appId) =>
    request(t.http).get('/api/v1/rollups').query({ appId }).set(headers);

  describe.each([
    ['ingest', () => ingest],
    ['events', () => events],
    ['rollups', () => rollups],
  ] as const)('%s: 401 invalid_key', (_name, endpoint) => {
    it.each([
      ['no Authorization header', {}],
      ['a Basic scheme', { Authorization: 'Basic dXNlcjpwYXNz' }],
      ['an empty bearer', { Authorization: 'Bearer ' }],
      ['a malformed key', { Authorization: 'Bearer not-a-key' }],
      ['a well-formed key with a bad checksum', { Authorization: 'Bearer tly_live_' + 'A'.repeat(49) }],
      ['a well-formed unknown api key', { Authorization: 'Bearer tly_api_' + 'A'.repeat(49) }],
    ])('%s', async (_label, headers) => {
      const res = await endpoint()(headers as Record<string, string>);
      expectProblem(res, 401, 'invalid_key');
      expect(res.headers['www-authenticate']).toBe(INVALID);
    });
  });

  it('accepts a good ingest key and a good API key', async () => {
    expect((await ingest(bearer(tenant.liveKey))).status).toBe(200);
    expect((await ingest(bearer(tenant.testKey))).status).toBe(200);
    const res = await events(bearer(tenant.apiKey));
    expect(res.status).toBe(200);
    expect(Array.isArray(res.body)).toBe(true);
    expect((await rollups(bearer(tenant.apiKey))).status).toBe(200);
  });

  it('a revoked key is invalid_key on every endpoint', async () => {
    const ingestKey = await makeIngestKey(t.app, tenant.appId);
    const apiKey = await makeApiKey(t.app, [tenant.appId]);
    expect((await ingest(bearer(ingestKey.key))).status).toBe(200);
    await t.app.get(KeysService).revoke(ingestKey.id, TEST_ACTOR);
    await t.app.get(KeysService).revoke(apiKey.id, TEST_ACTOR);
    expectProblem(await ingest(bearer(ingestKey.key)), 401, 'invalid_key');
    expectProblem(await events(bearer(apiKey.key)), 401, 'invalid_key');
    expectProblem(await rollups(bearer(apiKey.key)), 401, 'invalid_key');
  });

  it('an expired key is invalid_key', async () => {
    const apiKey = await makeApiKey(t.app, [tenant.appId], ['events:read'], 1);
    expect((await events(bearer(apiKey.key))).status).toBe(200);
    await t.db.query(`UPDATE keys SET expires_at = now() - interval '1 second' WHERE id = $1`, [apiKey.id]);
    // The key cache may hold the row for KEY_CACHE_TTL_MS; this app uses the default, so
    // bypass it by asking for a fresh read through a new key id lookup after the TTL.
    t.app.get(KeyVerifier).forgetAllCached();
    const res = await events(bearer(apiKey.key));
    expectProblem(res, 401, 'invalid_key');
    expect(res.headers['www-authenticate']).toBe(INVALID);
  });

  it('an API key on ingest is wrong_key_type', async () => {
    const res = await ingest(bearer(tenant.apiKey));
    expectProblem(res, 401, 'wrong_key_type');
    expect(res.headers['www-authenticate']).toBe(INVALID);
  });

  it.each([['events'], ['rollups']])('an ingest key on %s is wrong_key_type', async (name) => {
    const call = name === 'events' ? events : rollups;
    for (const key of [tenant.liveKey, tenant.testKey]) {
      const res = await call(bearer(key));
      expectProblem(res, 401, 'wrong_key_type');
      expect(res.headers['www-authenticate']).toBe(INVALID);
    }
  });

  it('a key without the endpoint scope is insufficient_scope', async () => {
    const eventsOnly = await makeApiKey(t.app, [tenant.appId], ['events:read']);
    const rollupsOnly = await makeApiKey(t.app, [tenant.appId], ['rollups:read']);
    let res = await rollups(bearer(eventsOnly.key));
    expectProblem(res, 403, 'insufficient_scope');
    expect(res.headers['www-authenticate']).toBe(
      'Bearer realm="tally", error="insufficient_scope", scope="rollups:read"',
    );
    res = await events(bearer(rollupsOnly.key));
    expectProblem(res, 403, 'insufficient_scope');
    expect(res.headers['www-authenticate']).toBe(
      'Bearer realm="tally", error="insufficient_scope", scope="events:read"',
    );
    expect((await events(bearer(eventsOnly.key))).status).toBe(200);
  });

  it('an app outside the key is app_forbidden, and so is an app that does not exist', async () => {
    const other = await makeApp(t.app);
    const missing = '00000000-0000-4000-8000-000000000000';
    for (const call of [events, rollups]) {
      const a = await call(bearer(tenant.apiKey), other.id);
      const b = await call(bearer(tenant.apiKey), missing);
      expectProblem(a, 403, 'app_forbidden');
      expectProblem(b, 403, 'app_forbidden');
      // The two answers are the same apart from the request id: no existence leak.
      expect({ ...a.body, requestId: null }).toEqual({ ...b.body, requestId: null });
      expect(a.headers['www-authenticate']).toMatch(/error="insufficient_scope"/);
    }
  });

  it('a key for several apps reads each of them', async () => {
    const second = await makeApp(t.app);
    const key = await makeApiKey(t.app, [tenant.appId, second.id]);
    expect((await events(bearer(key.key), tenant.appId)).status).toBe(200);
    expect((await events(bearer(key.key), second.id)).status).toBe(200);
  });

  it('echoes a sane X-Request-Id and replaces an unsafe one', async () => {
    const sane = await events(bearer(tenant.apiKey)).set('X-Request-Id', 'abc-123');
    expect(sane.headers['x-request-id']).toBe('abc-123');
    const unsafe = await request(t.http).get('/api/v1/events').set('X-Request-Id', 'x'.repeat(300));
    expect(unsafe.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(unsafe.body.requestId).toBe(unsafe.headers['x-request-id']);
  });

  it('answers unknown routes with a not_found problem', async () => {
    const res = await request(t.http).get('/nope');
    expectProblem(res, 404, 'not_found');
  });
});

describe('401 flood', () => {
  const t = useTestApp({ AUTH_FAILURE_LIMIT: '3' });
  it('answers 429 to invalid keys once an address has had AUTH_FAILURE_LIMIT of a prefix in a minute; a good key is still served', async () => {
    const tenant = await makeTenant(t.app);
    for (let i = 0; i < 3; i++) {
      const res = await request(t.http)
        .get('/api/v1/events')
        .query({ appId: tenant.appId })
        .set(bearer('tly_api_bad'));
      expectProblem(res, 401, 'invalid_key');
    }
    const blocked = await request(t.http)
      .get('/api/v1/events')
      .query({ appId: tenant.appId })
      .set(bearer('tly_api_bad'));
    expectProblem(blocked, 429, 'too_many_auth_failures');
    expect(Number(blocked.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    const good = await request(t.http)
      .get('/api/v1/events')
      .query({ appId: tenant.appId })
      .set(bearer(tenant.apiKey));
    expect(good.status).toBe(200);
    // The limit is per key prefix: guessed tly_api_ keys leave ingest keys from the address alone.
    const otherPrefix = await request(t.http)
      .post('/api/ingest')
      .set(bearer(tenant.liveKey))
      .send({ events: [] });
    expectProblem(otherPrefix, 400, 'invalid_body');
  });
});
