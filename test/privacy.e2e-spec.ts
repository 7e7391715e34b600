import request from 'supertest';
import { DAY_MS, HOUR_MS, utcDateString } from '@app/common/time';
import { AuditService } from '@app/audit/audit.service';
import { RollupsService } from '@app/rollups/rollups.service';
import { SuppressionsService } from '@app/privacy/suppressions.service';
import { bearer, makeApiKey, makeApp, makeIngestKey, postIngest } from './factories';
import { clockWithinUtcDay } from './support/clock';
import { expectIngestAnswer } from './support/ingest-answer';
import { useTestApp } from './support/test-app';

// Its own file: the log lines are captured (nestjs-pino keeps one logger per module registry).

const UNTHROTTLED = {
  INGEST_RATE_REQUESTS: '1000000',
  INGEST_RATE_EVENTS: '100000000',
  READ_RATE_REQUESTS: '1000000',
  AUTH_FAILURE_LIMIT: '1000000',
};

const ERASED = ['erase-me-03', 'Erase.Me@Example.com'];
const NAMES = ['Shop.viewed', 'Shop.bought', 'Page.opened'];

interface Sent {
  eventId: string;
  eventName: string;
  anonymousUserId: string;
  sessionId: string;
  eventTime: number;
  floatValue: number;
}

function users(): string[] {
  const ids = Array.from({ length: 18 }, (_, i) => `keep-${String(i).padStart(2, '0')}`);
  return [...ids, ...ERASED];
}

/** 3 days × 20 users × 3 events, with floatValues. */
function batchOfThreeDays(now: number): Sent[] {
  const out: Sent[] = [];
  for (let d = 0; d < 3; d++) {
    users().forEach((user, u) => {
      for (let k = 0; k < 3; k++) {
        out.push({
          eventId: `ev-${d}-${u}-${k}`,
          eventName: NAMES[(u + k) % NAMES.length],
          anonymousUserId: user,
          sessionId: `s-${user}-${d}`,
          eventTime: now - d * DAY_MS - (u * 3 + k) * 60_000,
          floatValue: (u + 1) * 1.25 + k,
        });
      }
    });
  }
  return out;
}

/** The rollup rows of `events`, computed here without the SQL. */
function expectedRollups(events: Sent[], storedUser: (id: string) => string) {
  const groups = new Map<string, Sent[]>();
  for (const e of events) {
    for (const name of ['', e.eventName]) {
      const key = `${utcDateString(e.eventTime)}|${name}`;
      groups.set(key, [...(groups.get(key) ?? []), e]);
    }
  }
  return [...groups.entries()]
    .map(([key, rows]) => {
      const [date, name] = key.split('|');
      const values = rows.map((r) => r.floatValue);
      const sum = values.reduce((a, b) => a + b, 0);
      return {
        date,
        eventName: name === '' ? null : name,
        events: rows.length,
        uniqueUsers: new Set(rows.map((r) => storedUser(r.anonymousUserId))).size,
        uniqueSessions: new Set(rows.map((r) => r.sessionId)).size,
        floatValue: {
          count: values.length,
          sum: expect.closeTo(sum, 6),
          min: Math.min(...values),
          max: Math.max(...values),
          avg: expect.closeTo(sum / values.length, 6),
        },
        timezone: 'UTC',
      };
    })
    .sort((a, b) => (a.date + (a.eventName ?? '') < b.date + (b.eventName ?? '') ? -1 : 1));
}

async function waitForStatus(http: import('node:http').Server, key: string, id: string, status: string) {
  for (;;) {
    const res = await request(http).get(`/api/v1/deletions/${id}`).set(bearer(key));
    expect(res.status).toBe(200);
    if (res.body.status === status) return res.body;
    if (res.body.status === 'failed') throw new Error('deletion failed');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('erasure of users (POST /api/v1/deletions)', () => {
  const lines: string[] = [];
  const t = useTestApp(
    { ...UNTHROTTLED, LOG_LEVEL: 'info' },
    { logDestination: { write: (l: string) => lines.push(l) } },
  );
  let appId: string;
  let otherAppId: string;
  let ingestKey: string;
  let otherIngestKey: string;
  let privacyKey: string;
  let readKey: string;
  let otherReadKey: string;
  // Each day's events sit up to an hour before that day's `now`: three UTC days, whenever it runs.
  const now = clockWithinUtcDay(HOUR_MS);
  const sent = batchOfThreeDays(now);

  beforeAll(async () => {
    appId = (await makeApp(t.app)).id;
    otherAppId = (await makeApp(t.app)).id;
    ingestKey = (await makeIngestKey(t.app, appId)).key;
    otherIngestKey = (await makeIngestKey(t.app, otherAppId)).key;
    privacyKey = (await makeApiKey(t.app, [appId], ['privacy:write'])).key;
    readKey = (await makeApiKey(t.app, [appId])).key;
    otherReadKey = (await makeApiKey(t.app, [otherAppId])).key;
    for (const key of [ingestKey, otherIngestKey]) {
      const res = await postIngest(t.http, key, { events: sent });
      expect(res.status).toBe(200);
      expect(res.body.accepted).toBe(sent.length);
    }
    await t.app.get(RollupsService).compute({ appId });
    await t.app.get(RollupsService).compute({ appId: otherAppId });
  });

  async function allEvents(key: string, id: string) {
    const res = await request(t.http).get(`/api/v1/events?appId=${id}&limit=1000`).set(bearer(key));
    expect(res.status).toBe(200);
    return res.body as { anonymousUserId: string; eventId: string }[];
  }

  async function rollups(key: string, id: string) {
    const from = utcDateString(now - 3 * DAY_MS);
    const res = await request(t.http)
      .get(`/api/v1/rollups?appId=${id}&fromDate=${from}&toDate=${utcDateString(now)}`)
      .set(bearer(key));
    expect(res.status).toBe(200);
    return res.body as Record<string, unknown>[];
  }

  it('deletes the users everywhere, recomputes every day they touched and forgets their ids', async () => {
    const before = await rollups(readKey, appId);
    expect(before.every((r) => r.final === true || r.date === utcDateString(now))).toBe(true);
    const otherBefore = await rollups(otherReadKey, otherAppId);
    lines.length = 0;

    const res = await request(t.http)
      .post('/api/v1/deletions')
      .set(bearer(privacyKey))
      .set('Content-Type', 'application/json')
      .send({ appId, anonymousUserIds: [...ERASED, ERASED[0]] });
    expect(res.status).toBe(202);
    expect(res.headers.location).toBe(`/api/v1/deletions/${res.body.id}`);
    expect(res.body).toEqual({
      id: expect.any(String),
      appId,
      status: 'pending',
      users: 2,
      suppress: true,
      eventsDeleted: 0,
      daysRecomputed: 0,
      createdAt: expect.any(Number),
      startedAt: null,
      finishedAt: null,
    });

    const done = await waitForStatus(t.http, privacyKey, res.body.id, 'done');
    expect(done).toEqual(
      expect.objectContaining({ users: 2, eventsDeleted: 2 * 3 * 3, daysRecomputed: 3, suppress: true }),
    );
    expect(done.finishedAt).toBeGreaterThanOrEqual(done.startedAt);

    // Events: none of theirs in this app; the other app keeps everything.
    const kept = await allEvents(readKey, appId);
    expect(kept).toHaveLength(sent.length - 18);
    expect(
      kept.some((e) => ERASED.includes(e.anonymousUserId) || e.anonymousUserId.startsWith('hmac:')),
    ).toBe(false);
    expect(await allEvents(otherReadKey, otherAppId)).toHaveLength(sent.length);
    expect(await rollups(otherReadKey, otherAppId)).toEqual(otherBefore);

    // Rollups: every row equals a fresh computation over the kept events, final days included.
    const keptSent = sent.filter((e) => !ERASED.includes(e.anonymousUserId));
    const after = await rollups(readKey, appId);
    const strip = after.map(({ appId: _a, isTestMode: _t, final: _f, computedAt: _c, ...rest }) => rest);
    expect(
      strip.sort((a, b) =>
        String(a.date) + (a.eventName ?? '') < String(b.date) + (b.eventName ?? '') ? -1 : 1,
      ),
    ).toEqual(expectedRollups(keptSent, (u) => u));
    expect(after.filter((r) => r.date !== utcDateString(now)).every((r) => r.final === true)).toBe(true);

    // No raw id, and no pseudonym of one, in the answers, the log lines or any table.
    const pseudonym = (await t.app.get(SuppressionsService).storedUserIds(appId, [ERASED[1]]))[0];
    const secrets = [...ERASED, ERASED[1].toLowerCase(), pseudonym];
    const list = await request(t.http).get(`/api/v1/deletions?appId=${appId}`).set(bearer(privacyKey));
    expect(list.status).toBe(200);
    expect(list.body[0]).toEqual(done);
    expect(await rowsContaining(secrets, otherAppId)).toEqual([]);
    for (const s of secrets) {
      expect(JSON.stringify([res.body, done, list.body])).not.toContain(s);
      expect(lines.filter((l) => l.includes(s))).toEqual([]);
    }
    expect(lines.some((l) => l.includes(`deletion ${res.body.id} done`))).toBe(true);
  });

  /**
   * Every row of every table whose text holds one of `needles`, searched in the database (the
   * shared test database can hold hundreds of thousands of rows); `events` and `event_dedup` of
   * `skipApp` are left out.
   */
  async function rowsContaining(needles: string[], skipApp: string): Promise<string[]> {
    const tables = (await t.db.query(
      `SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename NOT LIKE 'events_p%'`,
    )) as { tablename: string }[];
    expect(tables.length).toBeGreaterThan(5);
    const out: string[] = [];
    for (const { tablename } of tables) {
      const skip = ['events', 'event_dedup'].includes(tablename) ? `app_id <> '${skipApp}' AND` : '';
      const rows = (await t.db.query(
        `SELECT t::text AS row FROM ${tablename} t
          WHERE ${skip} EXISTS (SELECT 1 FROM unnest($1::text[]) n WHERE strpos(t::text, n) > 0)`,
        [needles],
      )) as { row: string }[];
      for (const r of rows) out.push(`${tablename}: ${r.row}`);
    }
    return out;
  }

  it('refuses a suppressed user’s events with user_suppressed, unmetered, until the suppression is removed', async () => {
    const event = { eventName: 'Shop.viewed', anonymousUserId: ERASED[1].toUpperCase(), eventId: 'late-1' };
    const refused = await postIngest(t.http, ingestKey, { events: [event, { eventName: 'Shop.viewed' }] });
    expectIngestAnswer(
      refused,
      { received: 2, accepted: 1, rejected: 1, metered: 1, errorCounts: { user_suppressed: 1 } },
      [{ index: 0, eventId: 'late-1', field: 'anonymousUserId', code: 'user_suppressed' }],
    );
    const metrics = (await request(t.http).get('/metrics')).text;
    expect(metrics).toMatch(/^tally_deletions_total\{status="done"\} [1-9]/m);
    expect(metrics).toMatch(/^tally_events_suppressed_total [1-9]/m);
    expect(metrics).toMatch(/^tally_deletion_duration_seconds_count [1-9]/m);
    // The same id in another app is not suppressed.
    const elsewhere = await postIngest(t.http, otherIngestKey, { events: [event] });
    expect(elsewhere.body.accepted).toBe(1);

    const suppressions = t.app.get(SuppressionsService);
    expect(await suppressions.list(appId)).toHaveLength(2);
    expect(await suppressions.remove(appId, ERASED[1], { type: 'cli', osUser: 'test' })).toBe(true);
    expect(await suppressions.list(appId)).toHaveLength(1);
    const accepted = await postIngest(t.http, ingestKey, { events: [event] });
    expect(accepted.body).toEqual(expect.objectContaining({ accepted: 1, rejected: 0, metered: 1 }));

    // Every change is in the audit log, with counts and never an id.
    const entries = await t.app.get(AuditService).list({ appId, limit: 100 });
    const actions = entries.map((e) => e.action);
    for (const action of [
      'deletion.requested',
      'suppression.added',
      'deletion.finished',
      'suppression.removed',
    ]) {
      expect(actions).toContain(action);
    }
    const finished = entries.find((e) => e.action === 'deletion.finished')!;
    expect(finished.actor).toEqual({ type: 'api_key', keyId: expect.any(String) });
    expect(finished.details).toEqual(
      expect.objectContaining({ status: 'done', users: 2, eventsDeleted: 18 }),
    );
    expect(entries.find((e) => e.action === 'suppression.removed')!.actor).toEqual({
      type: 'cli',
      osUser: 'test',
    });
    expect(JSON.stringify(entries)).not.toMatch(/erase-me|example\.com|hmac:/i);
  });

  it('keeps the dedup claims: a resent copy of a deleted event is not stored again', async () => {
    const user = 'keep-05';
    const res = await request(t.http)
      .post('/api/v1/deletions')
      .set(bearer(privacyKey))
      .set('Content-Type', 'application/json')
      .send({ appId, anonymousUserIds: [user], suppress: false });
    expect(res.status).toBe(202);
    const done = await waitForStatus(t.http, privacyKey, res.body.id, 'done');
    expect(done.eventsDeleted).toBe(9);
    const original = sent.find((e) => e.anonymousUserId === user)!;
    const resend = await postIngest(t.http, ingestKey, { events: [original] });
    expect(resend.body).toEqual(expect.objectContaining({ accepted: 0, duplicates: 1 }));
    expect((await allEvents(readKey, appId)).some((e) => e.anonymousUserId === user)).toBe(false);
    // Running the deletion again changes nothing.
    const again = await request(t.http)
      .post('/api/v1/deletions')
      .set(bearer(privacyKey))
      .set('Content-Type', 'application/json')
      .send({ appId, anonymousUserIds: [user], suppress: false });
    expect((await waitForStatus(t.http, privacyKey, again.body.id, 'done')).eventsDeleted).toBe(0);
  });
});
