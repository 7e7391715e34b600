import request from 'supertest';
import type { Server } from 'node:http';
import { bearer, makeApiKey, makeTenant, postIngest } from './factories';
import { startTestApp, useTestApp, type TestApp } from './support/test-app';
import { expectProblem } from './support/problem';

const SCOPES = ['plans:read', 'plans:write', 'events:read', 'privacy:write'];
const NAME_BOUND = 5;

async function tenant(t: TestApp) {
  const s = await makeTenant(t.app);
  const key = (await makeApiKey(t.app, [s.appId], SCOPES)).key;
  return { ...s, key };
}

async function putPlan(http: Server, appId: string, key: string, body: unknown): Promise<void> {
  const current = await request(http).get('/api/v1/plan').query({ appId }).set(bearer(key));
  const res = await request(http)
    .put('/api/v1/plan')
    .query({ appId })
    .set(bearer(key))
    .set('If-Match', current.headers.etag as string)
    .set('Content-Type', 'application/json')
    .send(JSON.stringify(body));
  expect(res.status).toBe(200);
}

/** `n` events of distinct names, none of them planned. */
function uniqueNames(n: number, prefix: string) {
  return {
    events: Array.from({ length: n }, (_, i) => ({ eventName: `${prefix}.${i}`, eventId: `${prefix}-${i}` })),
  };
}

async function quarantineCount(t: TestApp, appId: string): Promise<number> {
  const [row] = (await t.db.query(`SELECT count(*)::int AS n FROM quarantine WHERE app_id = $1`, [
    appId,
  ])) as {
    n: number;
  }[];
  return row.n;
}

async function qualityNames(t: TestApp, appId: string): Promise<number> {
  const [row] = (await t.db.query(`SELECT count(*)::int AS n FROM plan_quality_daily WHERE app_id = $1`, [
    appId,
  ])) as { n: number }[];
  return row.n;
}

const rejectAll = { mode: 'enforce', unplanned: 'reject', events: { 'Known.event': {} } };

describe('bounds on what one key can keep in the quarantine', () => {
  const t = useTestApp({
    INGEST_MAX_EVENT_NAMES_PER_DAY: String(NAME_BOUND),
    QUARANTINE_MAX_EVENTS_PER_DAY: '1000',
  });

  it('applies the per-day event-name bound before the quarantine and the data-quality counts', async () => {
    const s = await tenant(t);
    await putPlan(t.http, s.appId, s.key, rejectAll);
    const res = await postIngest(t.http, s.liveKey, uniqueNames(20, 'Flood'));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ received: 20, accepted: 0, rejected: 20 });
    expect(res.body.errorCounts).toEqual({
      unplanned_event: NAME_BOUND,
      too_many_event_names: 20 - NAME_BOUND,
    });
    expect(res.body.errors[NAME_BOUND]).toMatchObject({
      index: NAME_BOUND,
      field: 'eventName',
      code: 'too_many_event_names',
    });
    expect(await quarantineCount(t, s.appId)).toBe(NAME_BOUND);
    // The data-quality counts reach the database on the next read.
    const quality = await request(t.http)
      .get('/api/v1/plan/quality')
      .query({ appId: s.appId })
      .set(bearer(s.key));
    expect(quality.status).toBe(200);
    expect(quality.body).toHaveLength(NAME_BOUND);
    expect(await qualityNames(t, s.appId)).toBe(NAME_BOUND);
    // A name the day already holds is still quarantined.
    const again = await postIngest(t.http, s.liveKey, {
      events: [{ eventName: 'Flood.0', eventId: 'again' }, { eventName: 'Flood.99' }],
    });
    expect(again.body.errorCounts).toEqual({ unplanned_event: 1, too_many_event_names: 1 });
    expect(await quarantineCount(t, s.appId)).toBe(NAME_BOUND + 1);
  });

  describe('GET /api/v1/plan/quality is paged', () => {
    async function flagged() {
      const s = await tenant(t);
      await putPlan(t.http, s.appId, s.key, { mode: 'flag', unplanned: 'flag', events: {} });
      // Names with 1..5 events each: the order is by count, most first.
      const events = [1, 2, 3, 4, 5].flatMap((n) =>
        Array.from({ length: n }, (_, i) => ({ eventName: `Page.${n}`, eventId: `p-${n}-${i}` })),
      );
      expect((await postIngest(t.http, s.liveKey, { events })).status).toBe(200);
      return s;
    }

    it('answers at most `limit` names, most flagged and rejected first, with the next page named', async () => {
      const s = await flagged();
      const seen: string[] = [];
      let path: string | null = `/api/v1/plan/quality?appId=${s.appId}&limit=2`;
      let pages = 0;
      while (path !== null) {
        const res = await request(t.http).get(path).set(bearer(s.key));
        expect(res.status).toBe(200);
        expect(res.body.length).toBeLessThanOrEqual(2);
        seen.push(...res.body.map((r: { eventName: string }) => r.eventName));
        const link = res.headers.link as string | undefined;
        if (link) {
          expect(link).toMatch(/rel="next"/);
          expect(res.headers['x-next-cursor']).toEqual(expect.any(String));
        }
        path = link ? /<([^>]+)>/.exec(link)![1] : null;
        pages++;
      }
      expect(pages).toBe(3);
      expect(seen).toEqual(['Page.5', 'Page.4', 'Page.3', 'Page.2', 'Page.1']);
    });

    it('refuses a tampered cursor, a cursor of another range and a bad limit', async () => {
      const s = await flagged();
      const first = await request(t.http)
        .get('/api/v1/plan/quality')
        .query({ appId: s.appId, limit: 1 })
        .set(bearer(s.key));
      const cursor = first.headers['x-next-cursor'] as string;
      expect(cursor).toEqual(expect.any(String));
      const tampered = await request(t.http)
        .get('/api/v1/plan/quality')
        .query({
          appId: s.appId,
          limit: 1,
          cursor: cursor.slice(0, -2) + (cursor.endsWith('A') ? 'BB' : 'AA'),
        })
        .set(bearer(s.key));
      expectProblem(tampered, 400, 'invalid_cursor');
      const otherRange = await request(t.http)
        .get('/api/v1/plan/quality')
        .query({ appId: s.appId, limit: 1, cursor, fromDate: '2020-01-01', toDate: '2020-01-02' })
        .set(bearer(s.key));
      expectProblem(otherRange, 400, 'invalid_cursor');
      const badLimit = await request(t.http)
        .get('/api/v1/plan/quality')
        .query({ appId: s.appId, limit: 0 })
        .set(bearer(s.key));
      expectProblem(badLimit, 400, 'invalid_query');
      expect(badLimit.body.errors).toEqual([expect.objectContaining({ field: 'limit' })]);
    });
  });

  describe('the quarantine replay respects the name bound', () => {
    let narrow: TestApp;
    beforeAll(async () => {
      narrow = await startTestApp({ INGEST_MAX_EVENT_NAMES_PER_DAY: '3' });
    });
    afterAll(async () => {
      await narrow.close();
    });

    it('keeps events whose name the day has no room for in the quarantine', async () => {
      const s = await tenant(t);
      await putPlan(t.http, s.appId, s.key, rejectAll);
      await postIngest(t.http, s.liveKey, uniqueNames(NAME_BOUND, 'Late'));
      expect(await quarantineCount(t, s.appId)).toBe(NAME_BOUND);
      // Another instance, whose bound is 3 names a day, replays them under a plan that allows all.
      await putPlan(narrow.http, s.appId, s.key, { mode: 'enforce', unplanned: 'allow', events: {} });
      const res = await request(narrow.http)
        .post('/api/v1/quarantine/replay')
        .query({ appId: s.appId })
        .set(bearer(s.key))
        .set('Content-Type', 'application/json')
        .send('{}');
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ replayed: 3, duplicates: 0, stillRejected: NAME_BOUND - 3 });
      expect(await quarantineCount(t, s.appId)).toBe(NAME_BOUND - 3);
    });
  });

  it('refuses a replay filter with a control character', async () => {
    const s = await tenant(t);
    const res = await request(t.http)
      .post('/api/v1/quarantine/replay')
      .query({ appId: s.appId })
      .set(bearer(s.key))
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ eventName: 'a\u0000b' }));
    expectProblem(res, 400, 'invalid_body');
    expect(res.body.errors).toEqual([expect.objectContaining({ field: 'eventName', code: 'invalid_value' })]);
  });
});

describe('QUARANTINE_MAX_EVENTS_PER_DAY', () => {
  const t = useTestApp({ QUARANTINE_MAX_EVENTS_PER_DAY: '3' });

  it('keeps at most the bound per app and day; the rest keep their code, get quarantine_full and are counted', async () => {
    const s = await tenant(t);
    await putPlan(t.http, s.appId, s.key, rejectAll);
    const first = await postIngest(t.http, s.liveKey, uniqueNames(2, 'Full'));
    expect(first.body.warningCounts).toEqual({});
    // Concurrent requests share the day's room: never more than the bound between them.
    const answers = await Promise.all(
      [0, 1, 2].map((i) => postIngest(t.http, s.liveKey, uniqueNames(2, `Full${i}`))),
    );
    const full = answers.reduce((n, r) => n + (r.body.warningCounts.quarantine_full ?? 0), 0);
    expect(full).toBe(5);
    for (const r of answers) {
      expect(r.status).toBe(200);
      expect(r.body.errorCounts).toEqual({ unplanned_event: 2 });
      for (const w of r.body.warnings) {
        expect(w).toEqual({
          index: expect.any(Number),
          eventId: expect.any(String),
          field: 'eventName',
          code: 'quarantine_full',
          message: expect.stringContaining('QUARANTINE_MAX_EVENTS_PER_DAY'),
        });
        // The warned event is one the response rejected.
        expect(r.body.errors.some((e: { index: number }) => e.index === w.index)).toBe(true);
      }
    }
    expect(await quarantineCount(t, s.appId)).toBe(3);
    const metrics = (await request(t.http).get('/metrics')).text;
    expect(metrics).toMatch(/tally_quarantine_dropped_total [5-9]/);
  });

  it('once the day is full, an SDK batch of refused messages is only warned: each by its position and id', async () => {
    const s = await tenant(t);
    // Three messages fill the day's room; the next batches find it full.
    const old = new Date(Date.now() - 400 * 86_400_000).toISOString();
    const batch = (tag: string, n: number) => ({
      api_key: s.liveKey,
      batch: Array.from({ length: n }, (_, i) => ({
        event: 'Late',
        uuid: `${tag}-${i}`,
        distinct_id: 'acct-1',
        timestamp: old,
      })),
    });
    const send = (body: unknown) =>
      request(t.http)
        .post('/api/posthog/batch/')
        .send(body as object);
    const filling = await send(batch('fill', 4));
    expect(filling.status).toBe(200);
    expect(filling.body.warningCounts).toEqual({ quarantine_full: 1 });
    expect(await quarantineCount(t, s.appId)).toBe(3);
    for (const tag of ['after', 'again']) {
      const res = await send(batch(tag, 2));
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ received: 2, accepted: 0, rejected: 2 });
      expect(res.body.errorCounts).toEqual({ event_too_old: 2 });
      expect(res.body.warningCounts).toEqual({ quarantine_full: 2 });
      expect(res.body.warnings).toEqual(
        [0, 1].map((index) => ({
          index,
          eventId: `${tag}-${index}`,
          field: 'eventName',
          code: 'quarantine_full',
          message: expect.stringContaining('QUARANTINE_MAX_EVENTS_PER_DAY'),
        })),
      );
    }
    expect(await quarantineCount(t, s.appId)).toBe(3);
  });

  it('is per app: another app of the same day still has its room', async () => {
    const s = await tenant(t);
    await putPlan(t.http, s.appId, s.key, rejectAll);
    const res = await postIngest(t.http, s.liveKey, uniqueNames(3, 'Other'));
    expect(res.body.warningCounts).toEqual({});
    expect(await quarantineCount(t, s.appId)).toBe(3);
  });
});

describe('GET /api/v1/deletions is paged, and deletions refuse control characters', () => {
  const t = useTestApp();

  async function deletion(http: Server, appId: string, key: string, user: string) {
    const res = await request(http)
      .post('/api/v1/deletions')
      .set(bearer(key))
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ appId, anonymousUserIds: [user], suppress: false }));
    expect(res.status).toBe(202);
    return res.body.id as string;
  }

  it('lists newest first, `limit` a page, and every deletion once across the pages', async () => {
    const s = await tenant(t);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await deletion(t.http, s.appId, s.key, `user-${i}`));
    const seen: string[] = [];
    let path: string | null = `/api/v1/deletions?appId=${s.appId}&limit=2`;
    while (path !== null) {
      const res = await request(t.http).get(path).set(bearer(s.key));
      expect(res.status).toBe(200);
      expect(res.body.length).toBeLessThanOrEqual(2);
      seen.push(...res.body.map((d: { id: string }) => d.id));
      const link = res.headers.link as string | undefined;
      path = link ? /<([^>]+)>/.exec(link)![1] : null;
    }
    expect(seen).toEqual([...ids].reverse());
    const all = await request(t.http).get('/api/v1/deletions').query({ appId: s.appId }).set(bearer(s.key));
    expect(all.body.map((d: { id: string }) => d.id)).toEqual([...ids].reverse());
    expect(all.headers.link).toBeUndefined();
  });

  it('refuses a bad limit, a tampered cursor and another app’s cursor', async () => {
    const a = await tenant(t);
    const b = await tenant(t);
    const both = (await makeApiKey(t.app, [a.appId, b.appId], ['privacy:write'])).key;
    for (let i = 0; i < 2; i++) await deletion(t.http, a.appId, a.key, `u-${i}`);
    const first = await request(t.http)
      .get('/api/v1/deletions')
      .query({ appId: a.appId, limit: 1 })
      .set(bearer(both));
    const cursor = first.headers['x-next-cursor'] as string;
    expect(cursor).toEqual(expect.any(String));
    const other = await request(t.http)
      .get('/api/v1/deletions')
      .query({ appId: b.appId, limit: 1, cursor })
      .set(bearer(both));
    expectProblem(other, 400, 'invalid_cursor');
    const tampered = await request(t.http)
      .get('/api/v1/deletions')
      .query({ appId: a.appId, cursor: 'x' + cursor.slice(1) })
      .set(bearer(both));
    expectProblem(tampered, 400, 'invalid_cursor');
    for (const limit of ['0', '1001', 'abc']) {
      const bad = await request(t.http)
        .get('/api/v1/deletions')
        .query({ appId: a.appId, limit })
        .set(bearer(both));
      expectProblem(bad, 400, 'invalid_query');
      expect(bad.body.errors).toEqual([expect.objectContaining({ field: 'limit' })]);
    }
  });

  it.each([
    ['NUL', 'a\u0000b'],
    ['a C0 control', 'line\nbreak'],
    ['a C1 control', 'x\u0085y'],
  ])('answers 400, never 500, for a user id with %s, and stores nothing', async (_name, user) => {
    const s = await tenant(t);
    const res = await request(t.http)
      .post('/api/v1/deletions')
      .set(bearer(s.key))
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ appId: s.appId, anonymousUserIds: ['fine', user] }));
    expectProblem(res, 400, 'invalid_body');
    expect(res.body.errors).toEqual([
      {
        field: 'anonymousUserIds[1]',
        code: 'invalid_value',
        message: 'An id must not contain control characters.',
      },
    ]);
    const list = await request(t.http).get('/api/v1/deletions').query({ appId: s.appId }).set(bearer(s.key));
    expect(list.body).toEqual([]);
  });
});
