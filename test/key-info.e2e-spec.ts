import request from 'supertest';
import { KeysService } from '@app/auth/keys.service';
import { KeyVerifier } from '@app/auth/key-verifier';
import { TEST_ACTOR, bearer, makeApiKey, makeApp, makeTenant } from './factories';
import { useTestApp } from './support/test-app';
import { expectProblem } from './support/problem';
import { Contract } from './support/contract';

const INVALID = 'Bearer realm="tally", error="invalid_token"';

describe('GET /api/v1/key', () => {
  const t = useTestApp({ AUTH_FAILURE_LIMIT: '1000' });
  let contract: Contract;

  beforeAll(async () => {
    contract = new Contract(t.app);
  });

  const describeKey = (headers: Record<string, string>) => request(t.http).get('/api/v1/key').set(headers);

  it('describes the presented key: mask, scopes, expiry and its apps by name', async () => {
    const alpha = await makeApp(t.app, 'Alpha app');
    const beta = await makeApp(t.app, 'Beta app');
    const key = await makeApiKey(t.app, [beta.id, alpha.id], ['rollups:read'], 30);
    const res = await describeKey(bearer(key.key));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: key.id,
      prefix: `tly_api_…${key.key.slice(-4)}`,
      scopes: ['rollups:read'],
      expiresAt: key.expiresAt,
      apps: [
        { id: alpha.id, name: 'Alpha app', timezone: 'UTC', dimensions: [] },
        { id: beta.id, name: 'Beta app', timezone: 'UTC', dimensions: [] },
      ],
    });
    expect(JSON.stringify(res.body)).not.toContain(key.key);
    expect(res.headers['ratelimit-limit']).toBe(String(t.config.readRateRequests));
    contract.expect(res, 'get', '/api/v1/key');
  });

  it('needs no scope, and shows a key that never expires with expiresAt null', async () => {
    const tenant = await makeTenant(t.app);
    const key = await makeApiKey(t.app, [tenant.appId], ['events:read']);
    const res = await describeKey(bearer(key.key));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      scopes: ['events:read'],
      expiresAt: null,
      apps: [{ id: tenant.appId }],
    });
  });

  it.each([
    ['no Authorization header', {}],
    ['a Basic scheme', { Authorization: 'Basic dXNlcjpwYXNz' }],
    ['a malformed key', { Authorization: 'Bearer not-a-key' }],
    ['an unknown api key', { Authorization: 'Bearer tly_api_' + 'A'.repeat(49) }],
  ])('401 invalid_key for %s', async (_label, headers) => {
    const res = await describeKey(headers as Record<string, string>);
    expectProblem(res, 401, 'invalid_key');
    expect(res.headers['www-authenticate']).toBe(INVALID);
    contract.expect(res, 'get', '/api/v1/key');
  });

  it('401 wrong_key_type for an ingest key', async () => {
    const tenant = await makeTenant(t.app);
    for (const key of [tenant.liveKey, tenant.testKey]) {
      const res = await describeKey(bearer(key));
      expectProblem(res, 401, 'wrong_key_type');
      expect(res.body.detail).toMatch(/takes an API key/);
      expect(res.headers['www-authenticate']).toBe(INVALID);
    }
  });

  it('401 invalid_key for a revoked or expired key', async () => {
    const tenant = await makeTenant(t.app);
    const revoked = await makeApiKey(t.app, [tenant.appId]);
    const expired = await makeApiKey(t.app, [tenant.appId], ['events:read'], 1);
    await t.app.get(KeysService).revoke(revoked.id, TEST_ACTOR);
    await t.db.query(`UPDATE keys SET expires_at = now() - interval '1 second' WHERE id = $1`, [expired.id]);
    t.app.get(KeyVerifier).forgetAllCached();
    for (const key of [revoked.key, expired.key]) {
      const res = await describeKey(bearer(key));
      expectProblem(res, 401, 'invalid_key');
      expect(res.headers['www-authenticate']).toBe(INVALID);
    }
  });
});

describe('GET /api/v1/key rate limit', () => {
  const t = useTestApp({ READ_RATE_REQUESTS: '2', RATE_WINDOW_MS: '60000' });

  it('shares the read budget of the key and answers 429 rate_limited with Retry-After', async () => {
    const tenant = await makeTenant(t.app);
    const first = await request(t.http).get('/api/v1/key').set(bearer(tenant.apiKey));
    expect(first.status).toBe(200);
    expect(first.headers['ratelimit-remaining']).toBe('1');
    const read = await request(t.http)
      .get('/api/v1/events')
      .query({ appId: tenant.appId })
      .set(bearer(tenant.apiKey));
    expect(read.status).toBe(200);
    const limited = await request(t.http).get('/api/v1/key').set(bearer(tenant.apiKey));
    expectProblem(limited, 429, 'rate_limited');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(limited.body).toMatchObject({ limit: 2, windowMs: 60000 });
  });
});
