import { Analytics } from '@segment/analytics-node';
import { PostHog } from 'posthog-node';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import request from 'supertest';
import { bearer, makeApiKey, makeApp, makeIngestKey } from './factories';
import { waitFor } from './support/harness';
import { expectProblem } from './support/problem';
import { useTestApp } from './support/test-app';

interface EventRow {
  eventName: string;
  eventId: string | null;
  anonymousUserId: string | null;
  sessionId: string | null;
  platform: string | null;
  appVersion: string | null;
  buildNumber: string | null;
  osVersion: string | null;
  locale: string | null;
  timezone: string | null;
  floatValue: number | null;
  isTestMode: boolean;
  payload: Record<string, unknown> | null;
}

/** A proxy that forwards each request but drops the answer of the first `drop` ones. */
function droppingProxy(
  target: string,
  drop: number,
): Promise<{ url: string; forwarded: () => number; server: Server }> {
  let forwarded = 0;
  const upstream = new URL(target);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const n = forwarded++;
      const out = httpRequest(
        {
          host: upstream.hostname,
          port: upstream.port,
          path: req.url,
          method: req.method,
          headers: req.headers,
        },
        (answer) => {
          const body: Buffer[] = [];
          answer.on('data', (c: Buffer) => body.push(c));
          answer.on('end', () => {
            // The event reached Tally and was committed; the client never hears of it.
            if (n < drop) return req.socket.destroy();
            res.writeHead(answer.statusCode ?? 502, answer.headers).end(Buffer.concat(body));
          });
        },
      );
      out.end(Buffer.concat(chunks));
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        forwarded: () => forwarded,
        server,
      }),
    ),
  );
}

describe('ingest in the Segment and PostHog wire formats, driven by the real SDKs', () => {
  const t = useTestApp();
  let base = '';

  beforeAll(async () => {
    await new Promise<void>((resolve) => t.http.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(t.http.address() as AddressInfo).port}`;
  });

  async function tenant() {
    const appId = (await makeApp(t.app)).id;
    const live = (await makeIngestKey(t.app, appId)).key;
    const test = (await makeIngestKey(t.app, appId, 'test')).key;
    const api = (await makeApiKey(t.app, [appId], ['events:read', 'privacy:write', 'plans:write'])).key;
    return { appId, live, test, api };
  }

  async function events(appId: string, api: string, testMode = 'false'): Promise<EventRow[]> {
    const res = await request(t.http)
      .get(`/api/v1/events?appId=${appId}&limit=100&testMode=${testMode}`)
      .set(bearer(api));
    expect(res.status).toBe(200);
    return res.body as EventRow[];
  }

  async function eventsEventually(appId: string, api: string, n: number, testMode = 'false') {
    let rows: EventRow[] = [];
    await waitFor(async () => (rows = await events(appId, api, testMode)).length >= n, {
      timeoutMs: 20_000,
      what: `${n} events`,
    });
    return rows;
  }

  it('@segment/analytics-node: track, page, screen and identify; account ids stored only as pseudonyms', async () => {
    const { appId, live, api } = await tenant();
    const segment = new Analytics({
      writeKey: live,
      host: base,
      path: '/api/segment/v1/batch',
      maxEventsInBatch: 10,
    });
    segment.track({
      userId: 'account-42',
      anonymousId: 'anon-1',
      event: 'Checkout.completed',
      properties: { plan: 'pro', revenue: 12.5, cart: { total: 3 } },
      context: {
        os: { name: 'iOS', version: '17.2' },
        app: { version: '2.4.1', build: '311' },
        locale: 'de-DE',
      },
    });
    segment.page({ anonymousId: 'anon-1', name: 'Pricing' });
    segment.screen({ userId: 'account-42', name: 'Home' });
    segment.identify({ userId: 'account-42', traits: { email: 'ann@example.com' } });
    await segment.closeAndFlush();

    const rows = await eventsEventually(appId, api, 3);
    const byName = Object.fromEntries(rows.map((r) => [r.eventName, r]));
    expect(Object.keys(byName).sort()).toEqual(['Checkout.completed', 'Page.viewed', 'Screen.viewed']);
    const track = byName['Checkout.completed'];
    expect(track).toMatchObject({
      platform: 'iOS',
      osVersion: '17.2',
      appVersion: '2.4.1',
      buildNumber: '311',
      locale: 'de-DE',
      floatValue: 12.5,
      payload: { plan: 'pro', revenue: 12.5, 'cart.total': 3 },
    });
    expect(track.anonymousUserId).toMatch(/^hmac:[0-9a-f]{64}$/);
    expect(byName['Screen.viewed'].anonymousUserId).toBe(track.anonymousUserId);
    expect(byName['Page.viewed']).toMatchObject({ anonymousUserId: 'anon-1', payload: { name: 'Pricing' } });
    const raw = await t.db.query(
      `SELECT count(*)::int AS n FROM events WHERE app_id = $1 AND (anonymous_user_id = 'account-42' OR payload_json::text LIKE '%ann@%')`,
      [appId],
    );
    expect(raw).toEqual([{ n: 0 }]);
  });

  it('posthog-node (gzip): capture, $pageview and $screen stored, $identify acknowledged', async () => {
    const { appId, live, api } = await tenant();
    const posthog = new PostHog(live, { host: `${base}/api/posthog`, flushAt: 10, flushInterval: 0 });
    posthog.capture({
      distinctId: 'account-42',
      event: 'Checkout.completed',
      properties: {
        plan: 'pro',
        value: 3,
        $session_id: 's-1',
        $os: 'Android',
        $app_version: '2.4.1',
        $set: { email: 'ann@example.com' },
      },
    });
    posthog.capture({
      distinctId: 'account-42',
      event: '$pageview',
      properties: { $current_url: 'https://x.test/' },
    });
    posthog.capture({ distinctId: 'account-42', event: '$screen', properties: { $screen_name: 'Home' } });
    posthog.identify({ distinctId: 'account-42', properties: { email: 'ann@example.com' } });
    await posthog.shutdown();

    const rows = await eventsEventually(appId, api, 3);
    expect(rows.map((r) => r.eventName).sort()).toEqual(['$pageview', '$screen', 'Checkout.completed']);
    const track = rows.find((r) => r.eventName === 'Checkout.completed')!;
    expect(track).toMatchObject({
      sessionId: 's-1',
      platform: 'Android',
      appVersion: '2.4.1',
      floatValue: 3,
      payload: { plan: 'pro', value: 3 },
    });
    expect(track.anonymousUserId).toMatch(/^hmac:/);
    expect(rows.every((r) => r.anonymousUserId === track.anonymousUserId)).toBe(true);
  });

  it('retries through a proxy that drops answers are stored once (message ids are event ids)', async () => {
    const { appId, live, api } = await tenant();
    const segProxy = await droppingProxy(base, 1);
    const phProxy = await droppingProxy(base, 1);
    try {
      const segment = new Analytics({
        writeKey: live,
        host: segProxy.url,
        path: '/api/segment/v1/batch',
        maxRetries: 3,
      });
      segment.track({ userId: 'u-retry', event: 'Retried.segment' });
      await segment.closeAndFlush();
      const posthog = new PostHog(live, {
        host: `${phProxy.url}/api/posthog`,
        flushAt: 1,
        flushInterval: 0,
        fetchRetryCount: 3,
        fetchRetryDelay: 50,
      });
      posthog.capture({ distinctId: 'u-retry', event: 'Retried.posthog' });
      await posthog.shutdown();
      expect(segProxy.forwarded()).toBeGreaterThanOrEqual(2);
      expect(phProxy.forwarded()).toBeGreaterThanOrEqual(2);
      const rows = await eventsEventually(appId, api, 2);
      expect(rows.map((r) => r.eventName).sort()).toEqual(['Retried.posthog', 'Retried.segment']);
    } finally {
      segProxy.server.close();
      phProxy.server.close();
    }
  });

  it('a test key stores test events, unmetered', async () => {
    const { appId, test, api } = await tenant();
    const segment = new Analytics({ writeKey: test, host: base, path: '/api/segment/v1/batch' });
    segment.track({ anonymousId: 'a-1', event: 'From.test' });
    await segment.closeAndFlush();
    const rows = await eventsEventually(appId, api, 1, 'true');
    expect(rows[0]).toMatchObject({ eventName: 'From.test', isTestMode: true });
    const res = await request(t.http)
      .post('/api/segment/v1/t')
      .auth(test, '')
      .send({ anonymousId: 'a-1', event: 'From.test', messageId: 'm-t' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ success: true, received: 1, accepted: 1, metered: 0, testMode: true });
  });

  it('a wrong key is 401 invalid_key in every place a key can be', async () => {
    const bad = 'tly_live_notavalidkey';
    const cases = [
      request(t.http)
        .post('/api/segment/v1/batch')
        .auth(bad, '')
        .send({ batch: [{ type: 'track', event: 'a' }] }),
      request(t.http)
        .post('/api/segment/v1/batch')
        .send({ writeKey: bad, batch: [{ type: 'track', event: 'a' }] }),
      request(t.http)
        .post('/api/segment/v1/batch')
        .send({ batch: [{ type: 'track', event: 'a' }] }),
      request(t.http)
        .post('/api/posthog/batch/')
        .send({ api_key: bad, batch: [{ event: 'a', distinct_id: 'x' }] }),
      request(t.http).post('/api/posthog/capture/').set(bearer(bad)).send({ event: 'a', distinct_id: 'x' }),
      request(t.http).post('/api/posthog/e/').send({ event: 'a', distinct_id: 'x' }),
    ];
    for (const res of await Promise.all(cases)) {
      expect(res.status).toBe(401);
      expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
      expect(res.body).toMatchObject({ status: 401, code: 'invalid_key' });
    }
  });

  it("a key found as the body's first member is checked against the parsed body: bad JSON after it, or a second key", async () => {
    const { live } = await tenant();
    const other = (await tenant()).live;
    const cases: [string, string, string][] = [
      ['/api/posthog/batch/', `{"api_key":"${live}","batch":[{"event":`, 'invalid_json'],
      ['/api/segment/v1/batch', `{"writeKey":"${live}","batch":[`, 'invalid_json'],
      [
        '/api/posthog/batch/',
        JSON.stringify({ api_key: live, batch: [{ event: 'a', distinct_id: 'x' }] }).replace(
          /}$/,
          `,"api_key":"${other}"}`,
        ),
        'invalid_body',
      ],
    ];
    for (const [path, body, code] of cases) {
      const res = await request(t.http).post(path).set('Content-Type', 'application/json').send(body);
      expect(res.status).toBe(400);
      expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
      expect(res.body).toMatchObject({ status: 400, code });
    }
    const twice = await request(t.http)
      .post('/api/posthog/batch/')
      .set('Content-Type', 'application/json')
      .send(cases[2][1]);
    expect(twice.body.detail).toBe(
      'The body names its key twice, with different values; nothing was stored.',
    );
  });

  it('PostHog ?compression=gzip-js as text/plain, and unknown Segment methods, bodies without messages', async () => {
    const { live } = await tenant();
    const body = gzipSync(
      JSON.stringify([
        { event: 'Js.event', properties: { token: live, distinct_id: 'd-1', k: 'v' }, uuid: 'u-gz' },
      ]),
    );
    const gz = await request(t.http)
      .post('/api/posthog/i/v0/e/?compression=gzip-js')
      .set('Content-Type', 'text/plain')
      .send(body);
    expect(gz.status).toBe(200);
    expect(gz.body).toMatchObject({ status: 1, received: 1, accepted: 1, acknowledged: 0 });

    const unknown = await request(t.http).post('/api/segment/v1/nope').auth(live, '').send({ event: 'a' });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ code: 'not_found' });

    const empty = await request(t.http).post('/api/segment/v1/batch').auth(live, '').send({ nothing: [] });
    expect(empty.status).toBe(400);
    expect(empty.body).toMatchObject({
      code: 'invalid_body',
      errors: [{ field: 'batch', code: 'missing_field' }],
    });

    const form = await request(t.http)
      .post('/api/posthog/batch')
      .set('Content-Type', 'application/x-www-form-urlencoded')
      .set(bearer(live))
      .send('data=abc');
    expect(form.status).toBe(415);
    expect(form.body).toMatchObject({ code: 'unsupported_media_type' });
  });

  it('a batch of more messages than INGEST_MAX_EVENTS is 413 in either format, and nothing is stored', async () => {
    const { appId, live, api } = await tenant();
    const messages = 1001;
    const segment = await request(t.http)
      .post('/api/segment/v1/batch')
      .auth(live, '')
      .send({
        batch: Array.from({ length: messages }, (_, i) => ({
          type: i % 2 ? 'identify' : 'track',
          event: 'Too.many',
          anonymousId: `a-${i}`,
          messageId: `seg-413-${i}`,
        })),
      });
    expectProblem(segment, 413, 'payload_too_large');
    expect(segment.body).toMatchObject({ limitEvents: 1000, receivedEvents: messages });
    expect(segment.body.detail).toBe(`The batch holds ${messages} messages; the limit is 1000.`);

    const postHog = await request(t.http)
      .post('/api/posthog/batch/')
      .send({
        api_key: live,
        batch: Array.from({ length: messages }, (_, i) => ({
          event: 'Too.many',
          distinct_id: `d-${i}`,
          uuid: `ph-413-${i}`,
        })),
      });
    expectProblem(postHog, 413, 'payload_too_large');
    expect(postHog.body).toMatchObject({ limitEvents: 1000, receivedEvents: messages });
    expect(await events(appId, api)).toEqual([]);
  });

  it('rejected messages are kept in the quarantine with their code whatever the plan mode, and counted by source', async () => {
    const { appId, live, api } = await tenant();
    const old = new Date(Date.now() - 40 * 86_400_000).toISOString();
    const res = await request(t.http)
      .post('/api/segment/v1/batch')
      .auth(live, '')
      .send({
        batch: [
          { type: 'identify', userId: 'x', traits: { email: 'ann@example.com' } },
          { type: 'track', event: 'Too.old', messageId: 'm-old', timestamp: old, userId: 'x' },
          { type: 'track', messageId: 'm-noname', anonymousId: 'ann@example.com' },
          { type: 'bogus' },
          { type: 'track', event: 'Fine', messageId: 'm-ok', properties: { list: [1, 2] } },
        ],
      });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ success: true, received: 4, accepted: 1, rejected: 3, acknowledged: 1 });
    expect(res.body.errors).toEqual([
      expect.objectContaining({
        index: 1,
        field: 'eventTime',
        code: 'event_too_old',
        message: expect.stringContaining('30 days'),
      }),
      expect.objectContaining({ index: 2, field: 'eventName', code: 'missing_field' }),
      expect.objectContaining({ index: 3, field: 'type', code: 'invalid_value' }),
    ]);
    expect(res.body.warnings).toContainEqual(
      expect.objectContaining({ index: 4, field: 'properties.list', code: 'ignored_field' }),
    );

    const q = await request(t.http).get(`/api/v1/quarantine?appId=${appId}`).set(bearer(api));
    expect(q.status).toBe(200);
    const kept = (q.body as { eventId: string; code: string; anonymousUserId: string | null }[]).sort(
      (a, b) => a.eventId.localeCompare(b.eventId),
    );
    expect(kept.map((r) => [r.eventId, r.code])).toEqual([
      ['m-noname', 'missing_field'],
      ['m-old', 'event_too_old'],
    ]);
    expect(kept.every((r) => r.anonymousUserId === null || r.anonymousUserId.startsWith('hmac:'))).toBe(true);

    const metrics = (await request(t.http).get('/metrics').expect(200)).text;
    expect(metrics).toMatch(/tally_ingest_events_total\{source="segment",outcome="acknowledged"\} [1-9]/);
    expect(metrics).toMatch(/tally_ingest_events_total\{source="segment",outcome="rejected"\} [1-9]/);
    expect(metrics).not.toContain('account-42');
  });

  it('a rejected message holding what PostgreSQL cannot store is kept without it, never a 5xx', async () => {
    const { appId, live, api } = await tenant();
    const res = await request(t.http)
      .post('/api/segment/v1/batch')
      .auth(live, '')
      .send(
        '{"batch":[{"type":"track","event":"Bad\\ud800","messageId":"\\ud800","userId":"a\\u0000b",' +
          '"properties":{"k\\u0000":"v","s":"\\udfff","ok":"x","mail":"ann@example.com"}}]}',
      )
      .set('Content-Type', 'application/json');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ received: 1, rejected: 1, errorCounts: { unstorable_value: 4 } });
    const q = await request(t.http).get(`/api/v1/quarantine?appId=${appId}`).set(bearer(api));
    expect(q.status).toBe(200);
    expect(q.body).toEqual([
      expect.objectContaining({
        eventName: '(invalid)',
        eventId: null,
        code: 'unstorable_value',
        payload: { ok: 'x', mail: '[redacted]' },
      }),
    ]);
    expect(q.body[0].anonymousUserId).toMatch(/^hmac:/);
  });

  it('POST /api/v1/deletions with userIds erases what either format sent under that account id', async () => {
    const { appId, live, api } = await tenant();
    await request(t.http)
      .post('/api/segment/v1/track')
      .auth(live, '')
      .send({ userId: 'gone-1', event: 'Seg', messageId: 'd-1' })
      .expect(200);
    await request(t.http)
      .post('/api/posthog/capture/')
      .send({ api_key: live, event: 'Ph', distinct_id: 'gone-1', uuid: 'd-2' })
      .expect(200);
    await request(t.http)
      .post('/api/posthog/capture')
      .send({ api_key: live, event: 'Ph', distinct_id: 'stays', uuid: 'd-3' })
      .expect(200);
    await eventsEventually(appId, api, 3);
    const deletion = await request(t.http)
      .post('/api/v1/deletions')
      .set(bearer(api))
      .send({ appId, userIds: ['gone-1'] });
    expect(deletion.status).toBe(202);
    expect(deletion.body).toMatchObject({ users: 1 });
    await waitFor(
      async () =>
        (await request(t.http).get(`/api/v1/deletions/${deletion.body.id}`).set(bearer(api))).body.status ===
        'done',
      { timeoutMs: 30_000, what: 'the deletion' },
    );
    expect((await events(appId, api)).map((r) => r.eventId)).toEqual(['d-3']);
    const again = await request(t.http)
      .post('/api/segment/v1/track')
      .auth(live, '')
      .send({ userId: 'gone-1', event: 'Seg', messageId: 'd-4' });
    expect(again.body).toMatchObject({
      accepted: 0,
      rejected: 1,
      errors: [expect.objectContaining({ code: 'user_suppressed' })],
    });

    const bad = await request(t.http)
      .post('/api/v1/deletions')
      .set(bearer(api))
      .send({ appId, userIds: [7] });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({
      code: 'invalid_body',
      errors: [expect.objectContaining({ field: 'userIds[0]', code: 'invalid_type' })],
    });
  });
});
