import request from 'supertest';
import type { Server } from 'node:http';
import { bearer, makeApiKey, makeTenant, postIngest } from './factories';
import { QuarantineService } from '@app/plans/quarantine.service';
import { QuarantineRepository } from '@app/plans/quarantine.repository';
import { useTestApp } from './support/test-app';
import { expectProblem } from './support/problem';

const PLAN_SCOPES = ['plans:read', 'plans:write', 'events:read'];

/** A plan of two events that exercises every kind of rule. */
function plan(mode: string, unplanned = 'allow') {
  return {
    mode,
    unplanned,
    events: {
      'Checkout.completed': {
        description: 'A purchase.',
        floatValue: 'required',
        payload: {
          type: 'object',
          required: ['plan'],
          additionalProperties: false,
          properties: {
            plan: { type: 'string', enum: ['free', 'pro'] },
            items: { type: 'integer', minimum: 1, maximum: 100 },
            coupon: { type: 'string', pattern: '^[A-Z]{4}$' },
          },
        },
      },
      'Screen.viewed': { floatValue: 'forbidden' },
    },
  };
}

async function setup(http: Server, app: Parameters<typeof makeTenant>[0]) {
  const tenant = await makeTenant(app);
  const key = (await makeApiKey(app, [tenant.appId], PLAN_SCOPES)).key;
  return { ...tenant, planKey: key };
}

async function putPlan(http: Server, appId: string, key: string, body: unknown) {
  const current = await request(http).get('/api/v1/plan').query({ appId }).set(bearer(key));
  expect(current.status).toBe(200);
  const res = await request(http)
    .put('/api/v1/plan')
    .query({ appId })
    .set(bearer(key))
    .set('If-Match', current.headers.etag as string)
    .set('Content-Type', 'application/json')
    .send(JSON.stringify(body));
  expect(res.status).toBe(200);
  return res;
}

/** One event per case, with the field and the rule each must report. */
const CASES: { name: string; event: Record<string, unknown>; field: string; rule: string }[] = [
  { name: 'type', event: { payload: { plan: 7 } }, field: 'payload.plan', rule: '(type)' },
  { name: 'enum', event: { payload: { plan: 'gold' } }, field: 'payload.plan', rule: '(enum)' },
  { name: 'required', event: { payload: { items: 2 } }, field: 'payload.plan', rule: 'is required' },
  {
    name: 'additionalProperties',
    event: { payload: { plan: 'pro', extra: 'x' } },
    field: 'payload.extra',
    rule: 'additionalProperties',
  },
  {
    name: 'pattern',
    event: { payload: { plan: 'pro', coupon: 'abc' } },
    field: 'payload.coupon',
    rule: '(pattern)',
  },
  {
    name: 'minimum',
    event: { payload: { plan: 'pro', items: 0 } },
    field: 'payload.items',
    rule: '(minimum)',
  },
  {
    name: 'maximum',
    event: { payload: { plan: 'pro', items: 101 } },
    field: 'payload.items',
    rule: '(maximum)',
  },
];

function caseEvents() {
  const events: Record<string, unknown>[] = CASES.map((c, i) => ({
    eventName: 'Checkout.completed',
    eventId: `case-${i}`,
    floatValue: 9.5,
    ...c.event,
  }));
  // floatValue rules: missing where required, present where forbidden.
  events.push({ eventName: 'Checkout.completed', eventId: 'fv-req', payload: { plan: 'pro' } });
  events.push({ eventName: 'Screen.viewed', eventId: 'fv-forb', floatValue: 1 });
  // And one that follows the plan.
  events.push({
    eventName: 'Checkout.completed',
    eventId: 'ok',
    floatValue: 1,
    payload: { plan: 'free', items: 3 },
  });
  return events;
}

function expectCaseIssues(issues: { index: number; field: string; code: string; message: string }[]) {
  CASES.forEach((c, i) => {
    const mine = issues.filter((e) => e.index === i);
    expect(mine).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          field: c.field,
          code: 'schema_violation',
          message: expect.stringContaining(c.rule),
        }),
      ]),
    );
  });
  expect(issues.filter((e) => e.index === CASES.length)).toEqual([
    expect.objectContaining({
      field: 'floatValue',
      code: 'schema_violation',
      message: 'floatValue is required (floatValue).',
    }),
  ]);
  expect(issues.filter((e) => e.index === CASES.length + 1)).toEqual([
    expect.objectContaining({ field: 'floatValue', code: 'schema_violation', eventId: 'fv-forb' }),
  ]);
  expect(issues.filter((e) => e.index === CASES.length + 2)).toEqual([]);
}

describe('tracking plans', () => {
  // Replays spend their key's read time: three in a row on a slow database (a loaded Citus
  // cluster) took more than the default 500 ms a second, a budget no test here is about.
  const t = useTestApp({ READ_TIME_MS_PER_SECOND: '100000' });

  describe('GET/PUT /api/v1/plan', () => {
    it('answers version 0 and mode off for an app without a plan', async () => {
      const s = await setup(t.http, t.app);
      const res = await request(t.http).get('/api/v1/plan').query({ appId: s.appId }).set(bearer(s.planKey));
      expect(res.status).toBe(200);
      expect(res.headers.etag).toBe('"0"');
      expect(res.body).toEqual({
        appId: s.appId,
        version: 0,
        mode: 'off',
        unplanned: 'allow',
        events: {},
        createdAt: null,
      });
    });

    it('stores versions, answers the new ETag, and keeps the old versions', async () => {
      const s = await setup(t.http, t.app);
      const first = await putPlan(t.http, s.appId, s.planKey, plan('flag'));
      expect(first.headers.etag).toBe('"1"');
      expect(first.body).toMatchObject({ version: 1, mode: 'flag', unplanned: 'allow' });
      const second = await putPlan(t.http, s.appId, s.planKey, plan('enforce', 'reject'));
      expect(second.body).toMatchObject({ version: 2, mode: 'enforce', unplanned: 'reject' });
      const read = await request(t.http).get('/api/v1/plan').query({ appId: s.appId }).set(bearer(s.planKey));
      expect(read.headers.etag).toBe('"2"');
      expect(read.body.events['Checkout.completed'].floatValue).toBe('required');
      const rows = (await t.db.query(
        `SELECT version FROM tracking_plans WHERE app_id = $1 ORDER BY version`,
        [s.appId],
      )) as { version: number }[];
      expect(rows.map((r) => r.version)).toEqual([1, 2]);
      // Each change is in the audit log, by the key that made it.
      const audit = (await t.db.query(
        `SELECT actor_type, actor_id, target_id, details FROM audit_log
          WHERE app_id = $1 AND action = 'plan.updated' ORDER BY id`,
        [s.appId],
      )) as { actor_type: string; actor_id: string; target_id: string; details: unknown }[];
      const keyId = (await request(t.http).get('/api/v1/key').set(bearer(s.planKey))).body.id as string;
      expect(audit).toEqual([
        { actor_type: 'api_key', actor_id: keyId, target_id: '1', details: { version: 1, mode: 'flag' } },
        { actor_type: 'api_key', actor_id: keyId, target_id: '2', details: { version: 2, mode: 'enforce' } },
      ]);
    });

    const put = (appId: string, key: string, body: unknown, ifMatch?: string) => {
      const req = request(t.http)
        .put('/api/v1/plan')
        .query({ appId })
        .set(bearer(key))
        .set('Content-Type', 'application/json');
      if (ifMatch !== undefined) req.set('If-Match', ifMatch);
      return req.send(typeof body === 'string' ? body : JSON.stringify(body));
    };

    it('428 without If-Match, and nothing changes', async () => {
      const s = await setup(t.http, t.app);
      const res = await put(s.appId, s.planKey, plan('flag'));
      expectProblem(res, 428, 'precondition_required');
      expect(await t.db.query(`SELECT 1 FROM tracking_plans WHERE app_id = $1`, [s.appId])).toHaveLength(0);
    });

    it('412 version_conflict on a stale If-Match', async () => {
      const s = await setup(t.http, t.app);
      await putPlan(t.http, s.appId, s.planKey, plan('flag'));
      const res = await put(s.appId, s.planKey, plan('enforce'), '"0"');
      expectProblem(res, 412, 'version_conflict');
      expect(res.body.currentVersion).toBe(1);
    });

    it('400 invalid_header on a malformed If-Match', async () => {
      const s = await setup(t.http, t.app);
      expectProblem(await put(s.appId, s.planKey, plan('flag'), 'yesterday'), 400, 'invalid_header');
      const noApp = await request(t.http)
        .put('/api/v1/plan')
        .set(bearer(s.planKey))
        .set('If-Match', '"0"')
        .set('Content-Type', 'application/json')
        .send(JSON.stringify(plan('flag')));
      expectProblem(noApp, 400, 'invalid_query');
    });

    it('400 invalid_plan lists every problem with its path, and nothing changes', async () => {
      const s = await setup(t.http, t.app);
      const bad = {
        mode: 'strict',
        unplanned: 'maybe',
        extra: 1,
        events: {
          A: { floatValue: 'sometimes', payload: { type: 'objekt' } },
          B: { payload: { type: 'object', properties: { s: { type: 'string', pattern: '(a)\\1' } } } },
          C: { payload: { type: 'object', properties: { e: { type: 'string', format: 'email' } } } },
          '': {},
        },
      };
      const res = await put(s.appId, s.planKey, bad, '"0"');
      expectProblem(res, 400, 'invalid_plan');
      const paths = (res.body.problems as { path: string; message: string }[]).map((p) => p.path);
      expect(paths).toEqual(
        expect.arrayContaining([
          'mode',
          'unplanned',
          'extra',
          'events.A.floatValue',
          'events.A.payload.type',
          'events.B.payload',
          'events.C.payload',
          'events.',
        ]),
      );
      for (const p of res.body.problems) expect(p.message).toEqual(expect.any(String));
      expect(await t.db.query(`SELECT 1 FROM tracking_plans WHERE app_id = $1`, [s.appId])).toHaveLength(0);
    });

    it('400 invalid_json and 415 for a body that is not JSON', async () => {
      const s = await setup(t.http, t.app);
      expectProblem(await put(s.appId, s.planKey, '{nope', '"0"'), 400, 'invalid_json');
      const res = await request(t.http)
        .put('/api/v1/plan')
        .query({ appId: s.appId })
        .set(bearer(s.planKey))
        .set('If-Match', '"0"')
        .set('Content-Type', 'text/plain')
        .send('{}');
      expectProblem(res, 415, 'unsupported_media_type');
    });

    it('401 without a key, 403 without the scope or the app, 400 without appId', async () => {
      const s = await setup(t.http, t.app);
      const other = await makeTenant(t.app);
      expectProblem(await request(t.http).get('/api/v1/plan').query({ appId: s.appId }), 401, 'invalid_key');
      expectProblem(
        await request(t.http).get('/api/v1/plan').query({ appId: s.appId }).set(bearer(s.apiKey)),
        403,
        'insufficient_scope',
      );
      const readOnly = (await makeApiKey(t.app, [s.appId], ['plans:read'])).key;
      expectProblem(await put(s.appId, readOnly, plan('flag'), '"0"'), 403, 'insufficient_scope');
      expectProblem(
        await request(t.http).get('/api/v1/plan').query({ appId: other.appId }).set(bearer(s.planKey)),
        403,
        'app_forbidden',
      );
      expectProblem(await request(t.http).get('/api/v1/plan').set(bearer(s.planKey)), 400, 'invalid_query');
      expectProblem(
        await request(t.http).get('/api/v1/plan').query({ appId: s.appId }).set(bearer(s.liveKey)),
        401,
        'wrong_key_type',
      );
    });
  });

  describe('applied at ingest', () => {
    it('flag: every violation is a warning, the events are accepted and metered', async () => {
      const s = await setup(t.http, t.app);
      await putPlan(t.http, s.appId, s.planKey, plan('flag'));
      const res = await postIngest(t.http, s.liveKey, { events: caseEvents() });
      expect(res.status).toBe(200);
      const n = CASES.length + 3;
      expect(res.body).toMatchObject({ received: n, accepted: n, rejected: 0, metered: n, errors: [] });
      expectCaseIssues(res.body.warnings);
      const quarantined = await t.db.query(`SELECT 1 FROM quarantine WHERE app_id = $1`, [s.appId]);
      expect(quarantined).toHaveLength(0);
    });

    it('enforce: violations reject the event with schema_violation; rejected events are not metered but quarantined', async () => {
      const s = await setup(t.http, t.app);
      await putPlan(t.http, s.appId, s.planKey, plan('enforce'));
      const res = await postIngest(t.http, s.liveKey, { events: caseEvents() });
      expect(res.status).toBe(200);
      const n = CASES.length + 3;
      expect(res.body).toMatchObject({ received: n, accepted: 1, rejected: n - 1, metered: 1, warnings: [] });
      expectCaseIssues(res.body.errors);
      expect(res.body.errorCounts.schema_violation).toBeGreaterThanOrEqual(n - 1);
      const stored = (await t.db.query(`SELECT event_id FROM events WHERE app_id = $1`, [s.appId])) as {
        event_id: string;
      }[];
      expect(stored.map((r) => r.event_id)).toEqual(['ok']);

      const list = await request(t.http)
        .get('/api/v1/quarantine')
        .query({ appId: s.appId, limit: 3 })
        .set(bearer(s.planKey));
      expect(list.status).toBe(200);
      expect(list.body).toHaveLength(3);
      expect(list.body[0]).toMatchObject({
        appId: s.appId,
        code: 'schema_violation',
        eventName: expect.any(String),
      });
      expect(list.body[0].violations[0]).toEqual({
        field: expect.any(String),
        code: 'schema_violation',
        message: expect.any(String),
      });
      // Paged like events: the cursor takes the rest, with no overlap.
      const rest = await request(t.http)
        .get('/api/v1/quarantine')
        .query({ appId: s.appId, limit: 100, cursor: list.headers['x-next-cursor'] })
        .set(bearer(s.planKey));
      const ids = [...list.body, ...rest.body].map((e: { eventId: string }) => e.eventId).sort();
      expect(ids).toEqual(
        caseEvents()
          .slice(0, n - 1)
          .map((e) => e.eventId)
          .sort(),
      );
    });

    it('counts violations in tally_plan_violations_total', async () => {
      const s = await setup(t.http, t.app);
      await putPlan(t.http, s.appId, s.planKey, plan('enforce', 'reject'));
      await postIngest(t.http, s.liveKey, { events: [{ eventName: 'Nope' }] });
      const metrics = (await request(t.http).get('/metrics')).text;
      expect(metrics).toMatch(/tally_plan_violations_total\{code="unplanned_event"\} [1-9]/);
      expect(metrics).toMatch(/tally_plan_violations_total\{code="schema_violation"\} \d/);
    });

    it.each([
      ['enforce', 'allow', 'accepted', null],
      ['enforce', 'flag', 'accepted', 'warnings'],
      ['enforce', 'reject', 'rejected', 'errors'],
      ['flag', 'reject', 'accepted', 'warnings'],
    ])('mode %s, unplanned %s: an unplanned event is %s', async (mode, unplanned, verdict, list) => {
      const s = await setup(t.http, t.app);
      await putPlan(t.http, s.appId, s.planKey, plan(mode, unplanned));
      const res = await postIngest(t.http, s.liveKey, {
        events: [{ eventName: 'checkout_completed', eventId: 'u1' }],
      });
      expect(res.body[verdict as string]).toBe(1);
      const issue = {
        index: 0,
        eventId: 'u1',
        field: 'eventName',
        code: 'unplanned_event',
        message: expect.any(String),
      };
      expect(res.body.errors).toEqual(list === 'errors' ? [issue] : []);
      expect(res.body.warnings).toEqual(list === 'warnings' ? [issue] : []);
      const quarantined = await t.db.query(`SELECT code FROM quarantine WHERE app_id = $1`, [s.appId]);
      expect(quarantined).toEqual(list === 'errors' ? [{ code: 'unplanned_event' }] : []);
    });

    it('mode off stores the plan but does not apply it', async () => {
      const s = await setup(t.http, t.app);
      await putPlan(t.http, s.appId, s.planKey, plan('off', 'reject'));
      const res = await postIngest(t.http, s.liveKey, { events: caseEvents() });
      expect(res.body).toMatchObject({ accepted: CASES.length + 3, warnings: [], errors: [] });
    });

    it('a catastrophic-backtracking pattern is matched in linear time', async () => {
      const s = await setup(t.http, t.app);
      await putPlan(t.http, s.appId, s.planKey, {
        mode: 'enforce',
        events: {
          E: { payload: { type: 'object', properties: { s: { type: 'string', pattern: '^(a+)+$' } } } },
        },
      });
      const value = 'a'.repeat(999) + '!';
      const res = await postIngest(t.http, s.liveKey, {
        events: [
          { eventName: 'E', payload: { s: value } },
          { eventName: 'E', payload: { s: 'a'.repeat(1000) } },
        ],
      });
      expect(res.body).toMatchObject({ accepted: 1, rejected: 1 });
      expect(res.body.errors).toEqual([
        expect.objectContaining({ index: 0, field: 'payload.s', code: 'schema_violation' }),
      ]);
    });
  });

  describe('GET /api/v1/plan/quality', () => {
    it('counts per event name the accepted, flagged and rejected events and the top rules', async () => {
      const s = await setup(t.http, t.app);
      await putPlan(t.http, s.appId, s.planKey, plan('flag', 'flag'));
      await postIngest(t.http, s.liveKey, { events: caseEvents() });
      await putPlan(t.http, s.appId, s.planKey, plan('enforce', 'reject'));
      await postIngest(t.http, s.liveKey, { events: [...caseEvents().slice(0, 2), { eventName: 'Other' }] });
      const res = await request(t.http)
        .get('/api/v1/plan/quality')
        .query({ appId: s.appId })
        .set(bearer(s.planKey));
      expect(res.status).toBe(200);
      const byName = Object.fromEntries(res.body.map((r: { eventName: string }) => [r.eventName, r]));
      expect(byName['Checkout.completed']).toMatchObject({
        accepted: CASES.length + 2,
        flagged: CASES.length + 1,
        rejected: 2,
      });
      expect(byName['Checkout.completed'].topRules[0]).toEqual({
        field: 'payload.plan',
        rule: expect.any(String),
        count: expect.any(Number),
      });
      expect(byName['Checkout.completed'].topRules.length).toBeLessThanOrEqual(5);
      expect(byName['Screen.viewed']).toMatchObject({ accepted: 1, flagged: 1, rejected: 0 });
      expect(byName.Other).toEqual({
        eventName: 'Other',
        accepted: 0,
        flagged: 0,
        rejected: 1,
        topRules: [{ field: 'eventName', rule: 'unplanned', count: 1 }],
      });
    });

    it('400 for a bad range, 403 without plans:read', async () => {
      const s = await setup(t.http, t.app);
      const q = (query: Record<string, string>, key = s.planKey) =>
        request(t.http)
          .get('/api/v1/plan/quality')
          .query({ appId: s.appId, ...query })
          .set(bearer(key));
      expectProblem(await q({ fromDate: '2026-02-30' }), 400, 'invalid_query');
      expectProblem(await q({ fromDate: '2026-11-10', toDate: '2026-11-01' }), 400, 'invalid_query');
      expectProblem(await q({}, s.apiKey), 403, 'insufficient_scope');
    });
  });

  describe('POST /api/v1/plan/check', () => {
    const check = (appId: string, key: string, body: unknown) =>
      request(t.http)
        .post('/api/v1/plan/check')
        .query({ appId })
        .set(bearer(key))
        .set('Content-Type', 'application/json')
        .send(typeof body === 'string' ? body : JSON.stringify(body));

    it('answers what ingest answers under the stored plan, and stores, counts and meters nothing', async () => {
      const s = await setup(t.http, t.app);
      await putPlan(t.http, s.appId, s.planKey, plan('enforce'));
      const events = caseEvents();
      const dry = await check(s.appId, s.planKey, { events });
      expect(dry.status).toBe(200);
      expect(await t.db.query(`SELECT 1 FROM events WHERE app_id = $1`, [s.appId])).toHaveLength(0);
      expect(await t.db.query(`SELECT 1 FROM quarantine WHERE app_id = $1`, [s.appId])).toHaveLength(0);
      const real = await postIngest(t.http, s.liveKey, { events });
      const { serverTime: _a, payloadBytes: _b, ...dryBody } = dry.body;
      const { serverTime: _c, payloadBytes: _d, ...realBody } = real.body;
      expect(dryBody).toEqual(realBody);
      // Once stored, the same ids are duplicates for the dry run too, as for ingest.
      const again = await check(s.appId, s.planKey, { events });
      expect(again.body).toMatchObject({ accepted: 0, duplicates: 1 });
    });

    it('applies the plan in the body instead of the stored one', async () => {
      const s = await setup(t.http, t.app);
      const res = await check(s.appId, s.planKey, {
        events: [{ eventName: 'Checkout.completed', payload: { plan: 'gold' }, floatValue: 1 }],
        plan: plan('enforce'),
      });
      expect(res.body).toMatchObject({ accepted: 0, rejected: 1 });
      expect(res.body.errors[0]).toMatchObject({ field: 'payload.plan', code: 'schema_violation' });
    });

    it('400 invalid_plan for a plan in the body, 400 invalid_body for a bad envelope, 403 without plans:read', async () => {
      const s = await setup(t.http, t.app);
      const bad = await check(s.appId, s.planKey, { events: [{ eventName: 'x' }], plan: { mode: 'loud' } });
      expectProblem(bad, 400, 'invalid_plan');
      expect(bad.body.problems).toEqual([{ path: 'mode', message: expect.any(String) }]);
      expectProblem(await check(s.appId, s.planKey, { events: [] }), 400, 'invalid_body');
      expectProblem(await check(s.appId, s.planKey, 'nope'), 400, 'invalid_json');
      expectProblem(
        await check(s.appId, s.apiKey, { events: [{ eventName: 'x' }] }),
        403,
        'insufficient_scope',
      );
      const tooMany = await check(s.appId, s.planKey, {
        events: Array.from({ length: 1001 }, () => ({ eventName: 'x' })),
      });
      expectProblem(tooMany, 413, 'payload_too_large');
      expect(tooMany.body).toMatchObject({ limitEvents: 1000, receivedEvents: 1001 });
      const text = await request(t.http)
        .post('/api/v1/plan/check')
        .query({ appId: s.appId })
        .set(bearer(s.planKey))
        .set('Content-Type', 'text/plain')
        .send('{}');
      expectProblem(text, 415, 'unsupported_media_type');
      const other = await makeTenant(t.app);
      expectProblem(
        await check(other.appId, s.planKey, { events: [{ eventName: 'x' }] }),
        403,
        'app_forbidden',
      );
      const noApp = await request(t.http)
        .post('/api/v1/plan/check')
        .set(bearer(s.planKey))
        .set('Content-Type', 'application/json')
        .send('{"events":[{}]}');
      expectProblem(noApp, 400, 'invalid_query');
    });
  });

  describe('the quarantine', () => {
    const replay = (appId: string, key: string, body: unknown = {}) =>
      request(t.http)
        .post('/api/v1/quarantine/replay')
        .query({ appId })
        .set(bearer(key))
        .set('Content-Type', 'application/json')
        .send(typeof body === 'string' ? body : JSON.stringify(body));

    it('replays after a plan fix, storing each event once even when two replays run at once', async () => {
      const s = await setup(t.http, t.app);
      await putPlan(t.http, s.appId, s.planKey, plan('enforce'));
      const events = Array.from({ length: 60 }, (_, i) => ({
        eventName: 'Checkout.completed',
        eventId: `r-${i % 50}`,
        floatValue: 1,
        payload: { plan: i % 2 ? 'gold' : 'enterprise' },
      }));
      // Two batches: 50 distinct ids, 10 of them sent twice (a client retry).
      await postIngest(t.http, s.liveKey, { events: events.slice(0, 50) });
      await postIngest(t.http, s.liveKey, { events: events.slice(50) });
      expect(await t.db.query(`SELECT 1 FROM quarantine WHERE app_id = $1`, [s.appId])).toHaveLength(60);

      // Not fixed yet: nothing moves.
      const early = await replay(s.appId, s.planKey, { code: 'schema_violation' });
      expect(early.body).toEqual({ replayed: 0, duplicates: 0, stillRejected: 60 });

      const fixed = plan('enforce');
      (fixed.events['Checkout.completed'].payload.properties.plan as { enum: string[] }).enum.push(
        'gold',
        'enterprise',
      );
      await putPlan(t.http, s.appId, s.planKey, fixed);
      const [a, b] = await Promise.all([replay(s.appId, s.planKey), replay(s.appId, s.planKey)]);
      expect(a.status).toBe(200);
      expect(b.status).toBe(200);
      expect(a.body.replayed + b.body.replayed).toBe(50);
      expect(a.body.duplicates + b.body.duplicates).toBe(10);
      expect(a.body.stillRejected + b.body.stillRejected).toBe(0);
      const stored = (await t.db.query(
        `SELECT event_id, count(*)::int AS n FROM events WHERE app_id = $1 GROUP BY event_id`,
        [s.appId],
      )) as { n: number }[];
      expect(stored).toHaveLength(50);
      expect(stored.every((r) => r.n === 1)).toBe(true);
      expect(await t.db.query(`SELECT 1 FROM quarantine WHERE app_id = $1`, [s.appId])).toHaveLength(0);
      const replays = (await t.db.query(
        `SELECT details FROM audit_log WHERE app_id = $1 AND action = 'quarantine.replayed' ORDER BY id`,
        [s.appId],
      )) as { details: { replayed: number } }[];
      expect(replays).toHaveLength(3);
      expect(replays[1].details.replayed + replays[2].details.replayed).toBe(50);
      // A third run finds nothing; a resend of a replayed event is a duplicate.
      expect((await replay(s.appId, s.planKey)).body).toEqual({
        replayed: 0,
        duplicates: 0,
        stillRejected: 0,
      });
      const resend = await postIngest(t.http, s.liveKey, { events: [events[0]] });
      expect(resend.body).toMatchObject({ duplicates: 1, accepted: 0 });
    });

    it("marks the app's local days for the rollups, as ingest does", async () => {
      const s = await setup(t.http, t.app);
      await t.db.query(
        `UPDATE apps SET timezone = 'Asia/Tokyo', rollup_timezone = 'Asia/Tokyo' WHERE id = $1`,
        [s.appId],
      );
      await putPlan(t.http, s.appId, s.planKey, plan('enforce', 'reject'));
      await postIngest(t.http, s.liveKey, { events: [{ eventName: 'Tokyo.opened' }] });
      await putPlan(t.http, s.appId, s.planKey, plan('enforce', 'allow'));
      await t.db.query(`DELETE FROM rollup_dirty WHERE app_id = $1`, [s.appId]);
      expect((await replay(s.appId, s.planKey)).body).toEqual({
        replayed: 1,
        duplicates: 0,
        stillRejected: 0,
      });
      const marks = (await t.db.query(`SELECT DISTINCT timezone FROM rollup_dirty WHERE app_id = $1`, [
        s.appId,
      ])) as { timezone: string }[];
      expect(marks).toEqual([{ timezone: 'Asia/Tokyo' }]);
    });

    it('filters the replay by eventName and code', async () => {
      const s = await setup(t.http, t.app);
      await putPlan(t.http, s.appId, s.planKey, plan('enforce', 'reject'));
      await postIngest(t.http, s.liveKey, { events: [{ eventName: 'A' }, { eventName: 'B' }] });
      await putPlan(t.http, s.appId, s.planKey, plan('enforce', 'allow'));
      expect((await replay(s.appId, s.planKey, { eventName: 'A', code: 'unplanned_event' })).body).toEqual({
        replayed: 1,
        duplicates: 0,
        stillRejected: 0,
      });
      const left = await request(t.http)
        .get('/api/v1/quarantine')
        .query({ appId: s.appId, code: 'unplanned_event' })
        .set(bearer(s.planKey));
      expect(left.body.map((e: { eventName: string }) => e.eventName)).toEqual(['B']);
    });

    it('error paths of the replay and the listing', async () => {
      const s = await setup(t.http, t.app);
      expectProblem(await replay(s.appId, s.planKey, { code: 'nope' }), 400, 'invalid_body');
      expectProblem(await replay(s.appId, s.planKey, { unknown: 1 }), 400, 'invalid_body');
      expectProblem(await replay(s.appId, s.planKey, [1]), 400, 'invalid_body');
      const readOnly = (await makeApiKey(t.app, [s.appId], ['plans:read', 'events:read'])).key;
      expectProblem(await replay(s.appId, readOnly), 403, 'insufficient_scope');
      const other = await makeTenant(t.app);
      expectProblem(await replay(other.appId, s.planKey), 403, 'app_forbidden');
      expectProblem(await replay(s.appId, s.planKey, '{nope'), 400, 'invalid_json');
      const list = (q: Record<string, string>, key = s.planKey) =>
        request(t.http).get('/api/v1/quarantine').query(q).set(bearer(key));
      expectProblem(await list({ appId: s.appId, code: 'nope' }), 400, 'invalid_query');
      expectProblem(await list({ appId: s.appId, cursor: 'AAAA' }), 400, 'invalid_cursor');
      expectProblem(
        await list({ appId: s.appId }, (await makeApiKey(t.app, [s.appId], ['plans:read'])).key),
        403,
        'insufficient_scope',
      );
      expectProblem(await list({}), 400, 'invalid_query');
    });

    it('keeps partitions for today and the days ahead, and drops the days past QUARANTINE_DAYS', async () => {
      const repository = t.app.get(QuarantineRepository);
      await repository.createPartition('2020-01-01', '2020-01-02');
      const { dropped } = await t.app.get(QuarantineService).maintain(Date.now());
      expect(dropped).toContain('quarantine_p20200101');
      const days = (await repository.partitions()).map((p) => p.day);
      const today = new Date().toISOString().slice(0, 10);
      expect(days).toContain(today);
      expect(days).not.toContain('2020-01-01');
      expect(days.every((d) => d >= new Date(Date.now() - 7 * 86_400_000).toISOString().slice(0, 10))).toBe(
        true,
      );
    });

    it("deleteUsers (erasure) empties the user's quarantine and nobody else's", async () => {
      const s = await setup(t.http, t.app);
      await putPlan(t.http, s.appId, s.planKey, plan('enforce', 'reject'));
      await postIngest(t.http, s.liveKey, {
        events: [
          { eventName: 'X', anonymousUserId: 'u-1' },
          { eventName: 'Y', anonymousUserId: 'u-1' },
          { eventName: 'X', anonymousUserId: 'u-2' },
        ],
      });
      expect(await t.app.get(QuarantineService).deleteUsers(s.appId, ['u-1'])).toBe(2);
      const left = (await t.db.query(`SELECT anonymous_user_id FROM quarantine WHERE app_id = $1`, [
        s.appId,
      ])) as {
        anonymous_user_id: string;
      }[];
      expect(left).toEqual([{ anonymous_user_id: 'u-2' }]);
    });
  });
});
