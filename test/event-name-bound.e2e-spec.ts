import request from 'supertest';
import { RollupsService } from '@app/rollups/rollups.service';
import { EventNameBound } from '@app/ingest/event-name-bound';
import { DAY_MS, utcDateString } from '@app/common/time';
import { makeTenant, postIngest } from './factories';
import { seedEvents } from './factories/events';
import { expectIngestAnswer } from './support/ingest-answer';
import { startTestApp, useTestApp } from './support/test-app';

const LIMIT = 5;
const ENV = { INGEST_MAX_EVENT_NAMES_PER_DAY: String(LIMIT) };

const names = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}.${i}`);

describe('the per-app bound of distinct event names per day', () => {
  const t = useTestApp(ENV);

  it('rejects each event with a new name past the limit by itself, while known names flow', async () => {
    const tenant = await makeTenant(t.app);
    const first = await postIngest(t.http, tenant.liveKey, {
      events: names('Known', LIMIT).map((eventName) => ({ eventName })),
    });
    expectIngestAnswer(first, { accepted: LIMIT, rejected: 0 }, []);

    const mixed = await postIngest(t.http, tenant.liveKey, {
      events: [
        { eventName: 'Known.0', eventId: 'a' },
        { eventName: 'Brand.new', eventId: 'b' },
        { eventName: 'Known.4', eventId: 'c' },
        { eventName: 'Another.new', eventId: 'd' },
      ],
    });
    expectIngestAnswer(
      mixed,
      { received: 4, accepted: 2, rejected: 2, metered: 2, errorCounts: { too_many_event_names: 2 } },
      [
        { index: 1, eventId: 'b', field: 'eventName', code: 'too_many_event_names' },
        { index: 3, eventId: 'd', field: 'eventName', code: 'too_many_event_names' },
      ],
    );
    expect(mixed.body.errors[0].message).toContain(`limit of ${LIMIT} distinct event names`);
    expect(mixed.body.errors[0].message).toContain('INGEST_MAX_EVENT_NAMES_PER_DAY');

    const stored = (await t.db.query(`SELECT event_name FROM events WHERE app_id = $1 ORDER BY event_name`, [
      tenant.appId,
    ])) as { event_name: string }[];
    expect(new Set(stored.map((r) => r.event_name))).toEqual(new Set(names('Known', LIMIT)));

    const metrics = (await request(t.http).get('/metrics')).text;
    expect(metrics).toMatch(/tally_events_rejected_total\{code="too_many_event_names",mode="live"\} [1-9]/);
    expect(metrics).toMatch(/tally_event_name_limit_reached_total [1-9]/);
  });

  it('counts per app and per UTC day of the event', async () => {
    const flooded = await makeTenant(t.app);
    const other = await makeTenant(t.app);
    await postIngest(t.http, flooded.liveKey, {
      events: names('Flood', LIMIT + 3).map((eventName) => ({ eventName })),
    });

    const yesterday = Date.now() - DAY_MS;
    const res = await postIngest(t.http, flooded.liveKey, {
      events: [{ eventName: 'Yesterday.new', eventTime: yesterday }, { eventName: 'Today.new' }],
    });
    expect(res.body).toMatchObject({
      accepted: 1,
      rejected: 1,
      errors: [{ index: 1, code: 'too_many_event_names' }],
    });

    const clean = await postIngest(t.http, other.liveKey, {
      events: names('Other', LIMIT).map((eventName) => ({ eventName })),
    });
    expect(clean.body).toMatchObject({ accepted: LIMIT, rejected: 0 });
  });

  it('caps the rollup rows of an app-day, keeping the names with the most events, whatever was stored', async () => {
    const tenant = await makeTenant(t.app);
    const day = Date.now() - 2 * DAY_MS;
    // Stored behind ingest's back (as several instances or a restart could): 12 names, name i with i+1 events.
    const seed = names('Flood', 12).flatMap((eventName, i) =>
      Array.from({ length: i + 1 }, () => ({ eventName, receivedAt: day, anonymousUserId: `u${i}` })),
    );
    await seedEvents(t.db, tenant.appId, seed);
    const rollups = t.app.get(RollupsService);
    await rollups.compute({ appId: tenant.appId, from: utcDateString(day), to: utcDateString(day) });

    const rowsOfDay = async () =>
      (await t.db.query(
        `SELECT event_name, events::int AS events FROM rollups WHERE app_id = $1 AND day = $2::date ORDER BY event_name`,
        [tenant.appId, utcDateString(day)],
      )) as { event_name: string; events: number }[];
    let rows = await rowsOfDay();
    expect(rows).toHaveLength(LIMIT + 1);
    expect(rows[0]).toEqual({ event_name: '', events: seed.length });
    expect(
      rows
        .slice(1)
        .map((r) => r.event_name)
        .sort(),
    ).toEqual(
      names('Flood', 12)
        .slice(12 - LIMIT)
        .sort(),
    );

    // A name that climbs into the top replaces one that falls out; the day never holds more rows.
    await seedEvents(
      t.db,
      tenant.appId,
      Array.from({ length: 20 }, () => ({ eventName: 'Flood.0', receivedAt: day })),
    );
    await rollups.compute({ appId: tenant.appId, from: utcDateString(day), to: utcDateString(day) });
    rows = await rowsOfDay();
    expect(rows).toHaveLength(LIMIT + 1);
    expect(rows.map((r) => r.event_name)).toContain('Flood.0');
    expect(rows.map((r) => r.event_name)).not.toContain('Flood.7');
    expect(rows[0].events).toBe(seed.length + 20);
  });

  it('another instance learns the names of the day from the stored rollups', async () => {
    const tenant = await makeTenant(t.app);
    await postIngest(t.http, tenant.liveKey, {
      events: names('Seen', LIMIT).map((eventName) => ({ eventName })),
    });
    await t.app.get(RollupsService).compute({ appId: tenant.appId });

    const second = await startTestApp(ENV);
    try {
      // The first request of the day starts the merge with the stored names in the background.
      const known = await postIngest(second.http, tenant.liveKey, { events: [{ eventName: 'Seen.1' }] });
      expect(known.body).toMatchObject({ accepted: 1 });
      await second.app.get(EventNameBound).settled();
      const fresh = await postIngest(second.http, tenant.liveKey, {
        events: [{ eventName: 'Seen.2' }, { eventName: 'Unseen' }],
      });
      expect(fresh.body).toMatchObject({
        accepted: 1,
        rejected: 1,
        errors: [{ index: 1, code: 'too_many_event_names' }],
      });
    } finally {
      await second.close();
    }
  });
});
