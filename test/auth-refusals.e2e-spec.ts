import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { generateKey } from '@app/auth/key-format';
import { REFUSAL_FLOOR_MS } from '@app/auth/key-auth';
import { KeysService } from '@app/auth/keys.service';
import { KeyRepository } from '@app/auth/key.repository';
import { TEST_ACTOR, bearer, makeApiKey, makeTenant, postIngest } from './factories';
import { useTestApp } from './support/test-app';
import { expectProblem } from './support/problem';

/** A key whose shape and checksum are valid but which was never issued. */
const forged = (kind: 'live' | 'api') => generateKey(kind);

/** A key of the right shape whose checksum is wrong (its last character changed). */
function badChecksum(kind: 'live' | 'api'): string {
  const key = generateKey(kind);
  return key.slice(0, -1) + (key.endsWith('a') ? 'b' : 'a');
}

describe('forged keys from one address never lock out a valid key', () => {
  const t = useTestApp({ AUTH_FAILURE_LIMIT: '20' });

  it('60 forged well-formed keys, then a valid key of another app from the same address, is served', async () => {
    const victim = await makeTenant(t.app);
    const other = await makeTenant(t.app);
    const answers: number[] = [];
    for (let i = 0; i < 60; i++) {
      const res = await postIngest(t.http, forged('live'), { events: [{ eventName: 'x' }] });
      answers.push(res.status);
      if (i === 59) expectProblem(res, 429, 'too_many_auth_failures');
    }
    // The first AUTH_FAILURE_LIMIT are 401, the rest 429: the address limit still answers guessers.
    expect(answers.slice(0, 20).every((s) => s === 401)).toBe(true);
    expect(answers.slice(20).every((s) => s === 429)).toBe(true);
    const served = await postIngest(t.http, other.liveKey, { events: [{ eventName: 'x' }] });
    expect(served.status).toBe(200);
    expect(served.body).toEqual(expect.objectContaining({ accepted: 1 }));
    // And a read key of the first app, from the same address, reads.
    const read = await request(t.http)
      .get('/api/v1/events')
      .query({ appId: victim.appId })
      .set(bearer(victim.apiKey));
    expect(read.status).toBe(200);
  });

  it('a blocked address still gets 429 for a bad-checksum or repeated unknown key', async () => {
    const repeated = forged('api');
    for (let i = 0; i < 25; i++) {
      await request(t.http)
        .get('/api/v1/key')
        .set(bearer(i % 2 ? repeated : badChecksum('api')));
    }
    expectProblem(
      await request(t.http).get('/api/v1/key').set(bearer(repeated)),
      429,
      'too_many_auth_failures',
    );
    expectProblem(
      await request(t.http)
        .get('/api/v1/key')
        .set(bearer(badChecksum('api'))),
      429,
      'too_many_auth_failures',
    );
  });
});

describe('lookups of unknown keys', () => {
  const t = useTestApp({ AUTH_FAILURE_LIMIT: '5' });
  afterEach(() => jest.restoreAllMocks());

  it('a repeated unknown key costs one lookup; a bad checksum costs none', async () => {
    const lookups = jest.spyOn(t.app.get(KeyRepository), 'findByHash');
    const repeated = forged('api');
    for (let i = 0; i < 4; i++) {
      expectProblem(await request(t.http).get('/api/v1/key').set(bearer(repeated)), 401, 'invalid_key');
    }
    expect(lookups).toHaveBeenCalledTimes(1);
    await request(t.http)
      .get('/api/v1/key')
      .set(bearer(badChecksum('api')));
    expect(lookups).toHaveBeenCalledTimes(1);
  });

  it('from a blocked address they run one at a time, and a valid key is still served', async () => {
    const tenant = await makeTenant(t.app);
    for (let i = 0; i < 6; i++)
      await request(t.http)
        .get('/api/v1/key')
        .set(bearer(badChecksum('api')));
    const repository = t.app.get(KeyRepository);
    const original = repository.findByHash.bind(repository);
    let running = 0;
    let most = 0;
    jest.spyOn(repository, 'findByHash').mockImplementation(async (hash) => {
      running++;
      most = Math.max(most, running);
      try {
        return await original(hash);
      } finally {
        running--;
      }
    });
    const answers = await Promise.all(
      Array.from({ length: 8 }, () =>
        request(t.http)
          .get('/api/v1/key')
          .set(bearer(forged('api'))),
      ),
    );
    for (const res of answers) expectProblem(res, 429, 'too_many_auth_failures');
    expect(most).toBe(1);
    const key = await makeApiKey(t.app, [tenant.appId]);
    expect((await request(t.http).get('/api/v1/key').set(bearer(key.key))).status).toBe(200);
  });
});

describe('unknown, revoked, expired and bad-checksum keys are answered alike', () => {
  // No address limit here: every refusal must be a 401 through the same path.
  const t = useTestApp({ AUTH_FAILURE_LIMIT: '1000000' });
  let base = '';
  beforeAll(async () => {
    await new Promise<void>((resolve) => t.http.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(t.http.address() as AddressInfo).port}`;
  });

  // Whether the answer times of the kinds agree is a latency figure: `npm run bench --
  // --auth-refusals` measures it. Here, each kind is answered alike and goes through the floor.
  it('answers every kind of refused key with the same 401, no sooner than the refusal floor', async () => {
    const tenant = await makeTenant(t.app);
    const revoked = await makeApiKey(t.app, [tenant.appId]);
    await t.app.get(KeysService).revoke(revoked.id, TEST_ACTOR);
    const expired = await makeApiKey(t.app, [tenant.appId], ['events:read'], 1);
    await t.db.query(`UPDATE keys SET expires_at = now() - interval '1 second' WHERE id = $1`, [expired.id]);
    const kinds: Record<string, () => string> = {
      unknown: () => forged('api'),
      badChecksum: () => badChecksum('api'),
      revoked: () => revoked.key,
      expired: () => expired.key,
    };
    const bodies = new Set<string>();
    for (const [kind, key] of Object.entries(kinds)) {
      // The server waits out the floor before it answers, so no refusal can come sooner.
      const started = performance.now();
      const res = await request(base).get('/api/v1/events').query({ appId: tenant.appId }).set(bearer(key()));
      expect({ kind, fast: performance.now() - started < REFUSAL_FLOOR_MS }).toEqual({ kind, fast: false });
      expectProblem(res, 401, 'invalid_key');
      const { requestId: _requestId, ...body } = res.body as Record<string, unknown>;
      bodies.add(JSON.stringify(body));
    }
    expect(bodies.size).toBe(1);
  });
});
