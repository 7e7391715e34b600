import { makeTenant, postIngest } from './factories';
import { useTestApp } from './support/test-app';
import { expectProblem } from './support/problem';

// With EXPORT_SETTLE_MS=400, ingest must commit each event within 200 ms of its receive time.
describe('ingest commits every event within half the export horizon', () => {
  const t = useTestApp({ EXPORT_SETTLE_MS: '400' });

  it('refuses (503, nothing stored) a statement that ends too long after its receive time, and a retry stores it once', async () => {
    const tenant = await makeTenant(t.app);
    const stored = async () =>
      Number(
        (
          (await t.db.query(`SELECT count(*) AS n FROM events WHERE app_id = $1 AND event_id = 'held'`, [
            tenant.appId,
          ])) as { n: string }[]
        )[0].n,
      );
    // Another transaction holds the dedup claim of eventId "held", so the ingest statement waits.
    const blocker = t.db.createQueryRunner();
    await blocker.connect();
    await blocker.startTransaction();
    await blocker.query(`INSERT INTO event_dedup (app_id, event_id, seen_at) VALUES ($1, 'held', now())`, [
      tenant.appId,
    ]);
    const pending = postIngest(t.http, tenant.liveKey, {
      events: [{ eventName: 'A.b', eventId: 'held' }],
    }).then((res) => res);
    // Wait until the ingest statement has been blocked for longer than it may take. (On Citus the
    // coordinator hands the write to a worker as a function call, and the wait happens there.)
    for (;;) {
      const rows = (await t.db.query(
        `SELECT 1 FROM pg_stat_activity
          WHERE ((wait_event_type = 'Lock' AND query LIKE '%WITH input AS%')
                 OR query LIKE 'SELECT tally_ingest_app_%')
            AND pid <> pg_backend_pid()
            AND datname = current_database()
            AND clock_timestamp() - query_start > interval '300 milliseconds'`,
      )) as unknown[];
      if (rows.length) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await blocker.rollbackTransaction();
    await blocker.release();

    const res = await pending;
    expectProblem(res, 503, 'service_unavailable');
    expect(res.headers['retry-after']).toBeDefined();
    expect(await stored()).toBe(0);

    const retry = await postIngest(t.http, tenant.liveKey, {
      events: [{ eventName: 'A.b', eventId: 'held' }],
    });
    expect(retry.status).toBe(200);
    expect(retry.body).toMatchObject({ accepted: 1, duplicates: 0 });
    expect(await stored()).toBe(1);
  });
});
