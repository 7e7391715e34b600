import request from 'supertest';
import { bearer, makeTenant, postIngest } from './factories';
import { startTestApp, useTestApp, TestApp } from './support/test-app';
import { expectProblem } from './support/problem';

const LIMIT = 5;
const badKey = (prefix: string, i: number) => `${prefix}${'A'.repeat(43)}${String(i).padStart(6, '0')}`;

const read = (t: TestApp, appId: string, key: string, forwardedFor?: string) => {
  const req = request(t.http).get('/api/v1/events').query({ appId }).set(bearer(key));
  return forwardedFor === undefined ? req : req.set('X-Forwarded-For', forwardedFor);
};

describe('TRUST_PROXY: the client address is the right-most untrusted X-Forwarded-For entry', () => {
  let t: TestApp;
  beforeAll(async () => {
    // One proxy in front (here the test client itself, at 127.0.0.1), which appends the address
    // it saw to whatever X-Forwarded-For the client sent.
    t = await startTestApp({ TRUST_PROXY: '1', AUTH_FAILURE_LIMIT: String(LIMIT) });
  });
  afterAll(() => t.close());

  it('a new forged address on each request does not escape the invalid-key limit', async () => {
    const tenant = await makeTenant(t.app);
    const attacker = '203.0.113.9';
    for (let i = 0; i < LIMIT; i++) {
      const res = await read(t, tenant.appId, badKey('tly_api_', i), `10.9.${i}.1, ${attacker}`);
      expectProblem(res, 401, 'invalid_key');
    }
    const blocked = await read(t, tenant.appId, badKey('tly_api_', 99), `10.9.99.1, ${attacker}`);
    expectProblem(blocked, 429, 'too_many_auth_failures');
    expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('a forged address cannot lock its owner out', async () => {
    const tenant = await makeTenant(t.app);
    const victim = '198.51.100.7';
    for (let i = 0; i < LIMIT + 3; i++) {
      const res = await read(t, tenant.appId, badKey('tly_api_', i), `${victim}, 203.0.113.10`);
      expect([401, 429]).toContain(res.status);
    }
    const own = await read(t, tenant.appId, tenant.apiKey, victim);
    expect(own.status).toBe(200);
  });
});

describe('TRUST_PROXY as a list of proxy addresses and CIDRs', () => {
  const t = useTestApp({ TRUST_PROXY: 'loopback, 10.0.0.0/8', AUTH_FAILURE_LIMIT: String(LIMIT) });

  it('skips every trusted hop from the right, and only those', async () => {
    const tenant = await makeTenant(t.app);
    // The client forged the first entry; two internal proxies (10.x) forwarded the request.
    for (let i = 0; i < LIMIT; i++) {
      const res = await read(
        t,
        tenant.appId,
        badKey('tly_api_', i),
        `192.0.2.${i}, 203.0.113.20, 10.1.2.3, 10.4.5.6`,
      );
      expectProblem(res, 401, 'invalid_key');
    }
    expectProblem(
      await read(t, tenant.appId, badKey('tly_api_', 99), '192.0.2.200, 203.0.113.20, 10.7.7.7'),
      429,
      'too_many_auth_failures',
    );
    // A valid key from the blocked client is still served.
    expect((await read(t, tenant.appId, tenant.apiKey, '192.0.2.201, 203.0.113.20, 10.7.7.7')).status).toBe(
      200,
    );
    // Another client behind the same proxies is not affected.
    expect((await read(t, tenant.appId, tenant.apiKey, '203.0.113.21, 10.1.2.3')).status).toBe(200);
  });

  it.each([['true'], ['yes'], ['10.0.0.0/33'], ['not-an-address'], ['1000']])(
    'refuses TRUST_PROXY=%s at boot',
    async (value) => {
      await expect(startTestApp({ TRUST_PROXY: value })).rejects.toThrow(
        'Invalid configuration: TRUST_PROXY',
      );
    },
  );
});

describe('the invalid-key limit counts refused keys only, per address and key prefix', () => {
  const t = useTestApp({ AUTH_FAILURE_LIMIT: String(LIMIT) });

  it('valid keys of the wrong kind are answered 401 wrong_key_type and never lock the address out', async () => {
    const tenant = await makeTenant(t.app);
    for (let i = 0; i < LIMIT * 4; i++) {
      expectProblem(await read(t, tenant.appId, tenant.liveKey), 401, 'wrong_key_type');
    }
    expect((await read(t, tenant.appId, tenant.apiKey)).status).toBe(200);
    const ingest = await postIngest(t.http, tenant.apiKey, '{"events":[{"eventName":"x"}]}');
    expectProblem(ingest, 401, 'wrong_key_type');
  });

  it('guessed ingest keys block guessed ingest keys from the address, never a valid key', async () => {
    const tenant = await makeTenant(t.app);
    const ingest = (key: string) => postIngest(t.http, key, '{"events":[{"eventName":"x"}]}');
    for (let i = 0; i < LIMIT; i++) expectProblem(await ingest(badKey('tly_live_', i)), 401, 'invalid_key');
    expectProblem(await ingest(badKey('tly_live_', 99)), 429, 'too_many_auth_failures');
    expect((await ingest(tenant.liveKey)).status).toBe(200);
    // Other prefixes from the same address are not counted: test ingest keys, read keys, and a
    // missing key is still told it is missing.
    expect((await ingest(tenant.testKey)).status).toBe(200);
    expect((await read(t, tenant.appId, tenant.apiKey)).status).toBe(200);
    expectProblem(
      await request(t.http).get('/api/v1/events').query({ appId: tenant.appId }),
      401,
      'invalid_key',
    );
  });
});
