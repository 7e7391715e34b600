import { makeTenant, postIngest } from './factories';
import { storedEventCount } from './factories/events';
import { expectProblem } from './support/problem';
import { useTestApp } from './support/test-app';

describe('ingest when the day has no partition', () => {
  const t = useTestApp();
  it('answers 503 with Retry-After and stores nothing; the retried batch lands once the partition is back', async () => {
    const tenant = await makeTenant(t.app);
    const today = `events_p${new Date().toISOString().slice(0, 10).replace(/-/g, '')}`;
    const send = () =>
      postIngest(t.http, tenant.liveKey, { events: [{ eventName: 'App.opened', eventId: 'p-1' }] });
    const stored = () => storedEventCount(t.db, tenant.appId);

    // Detached, not dropped: the rows of other tests stay, and the table is put back below.
    await t.db.query(`ALTER TABLE events DETACH PARTITION ${today}`);
    try {
      const res = await send();
      expectProblem(res, 503, 'service_unavailable');
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(await stored()).toBe(0);
      const dedup = (await t.db.query(`SELECT count(*) AS n FROM event_dedup WHERE app_id = $1`, [
        tenant.appId,
      ])) as { n: string }[];
      expect(Number(dedup[0].n)).toBe(0);
    } finally {
      const bounds = (await t.db.query(
        `SELECT to_char(d, 'YYYY-MM-DD') AS start, to_char(d + 1, 'YYYY-MM-DD') AS "end"
           FROM (SELECT (now() AT TIME ZONE 'UTC')::date AS d) x`,
      )) as { start: string; end: string }[];
      await t.db.query(
        `ALTER TABLE events ATTACH PARTITION ${today}
           FOR VALUES FROM ('${bounds[0].start} 00:00:00+00') TO ('${bounds[0].end} 00:00:00+00')`,
      );
    }
    const retried = await send();
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ accepted: 1, duplicates: 0 });
    expect(await stored()).toBe(1);
  });
});
