import request from 'supertest';
import { PartitionMaintenanceService } from '@app/storage/partition-maintenance.service';
import { PartitionRepository } from '@app/storage/partition.repository';
import { DedupExpiryService } from '@app/ingest/dedup-expiry.service';
import { bearer, makeTenant } from './factories';
import { seedEvents } from './factories/events';
import { useTestApp } from './support/test-app';
import { DAY_MS as DAY, utcDateString as dayOf } from '@app/common/time';

describe('partitions and retention', () => {
  const t = useTestApp({
    EVENT_RETENTION_DAYS: '90',
    INGEST_MAX_EVENT_AGE_DAYS: '7',
    PARTITIONS_AHEAD_DAYS: '3',
  });
  let maintenance: PartitionMaintenanceService;

  beforeAll(async () => {
    maintenance = t.app.get(PartitionMaintenanceService);
    // The start-up pass over the current days' indexes holds the upkeep lock while it runs.
    await maintenance.pendingLookups;
  });

  const partitionDays = async () => new Set((await t.app.get(PartitionRepository).list()).map((p) => p.day));

  it('has a partition for every day an accepted event can land in, from boot on', async () => {
    const now = Date.now();
    const days = await partitionDays();
    // The oldest allowed event time (7 days, one more for clock-skew correction) to PARTITIONS_AHEAD_DAYS ahead.
    for (let n = -8; n <= 3; n++) expect(days).toContain(dayOf(now + n * DAY));
    expect(await maintenance.ensurePartitions(now)).toBe(0);
  });

  it('stores events at the oldest allowed time and at a clamped future time', async () => {
    const tenant = await makeTenant(t.app);
    const now = Date.now();
    const times = [now - 7 * DAY + 1000, Math.floor((now - 8 * DAY) / DAY) * DAY, now + 10 * 60_000, now];
    const ids = await seedEvents(
      t.db,
      tenant.appId,
      times.map((ts) => ({ eventName: 'Edge.case', ts, receivedAt: now })),
    );
    expect(ids).toHaveLength(4);
    const res = await request(t.http)
      .get('/api/v1/events')
      .query({ appId: tenant.appId })
      .set(bearer(tenant.apiKey));
    expect(res.status).toBe(200);
    expect(res.body.map((e: { timestamp: number }) => e.timestamp).sort()).toEqual([...times].sort());
  });

  it('creates the partitions of new days as time moves on', async () => {
    const later = Date.now() + 2 * DAY;
    await maintenance.ensurePartitions(later);
    const days = await partitionDays();
    for (let n = -8; n <= 3; n++) expect(days).toContain(dayOf(later + n * DAY));
  });

  it('drops a partition past EVENT_RETENTION_DAYS and keeps the rollups of its days', async () => {
    const tenant = await makeTenant(t.app);
    const now = Date.now();
    const oldDay = Math.floor((now - 120 * DAY) / DAY) * DAY;
    const keptDay = Math.floor((now - 89 * DAY) / DAY) * DAY;
    for (const day of [oldDay, keptDay]) await t.app.get(PartitionRepository).create(new Date(day));
    await seedEvents(t.db, tenant.appId, [
      { eventName: 'Old.event', ts: oldDay + 1000, receivedAt: oldDay + 1000, anonymousUserId: 'u1' },
      { eventName: 'Kept.event', ts: keptDay + 1000, receivedAt: keptDay + 1000 },
    ]);
    // The rollups of the old day, as computed while its events were still there.
    await t.db.query(
      `INSERT INTO rollups (app_id, day, is_test_mode, event_name, events, unique_users, unique_sessions,
                            fv_count, computed_at)
       VALUES ($1, $2, false, '', 1, 1, 0, 0, $3), ($1, $2, false, 'Old.event', 1, 1, 0, 0, $3)`,
      [tenant.appId, dayOf(oldDay), new Date(oldDay + 2 * DAY)],
    );

    const result = await maintenance.run(now);
    const oldName = `events_p${dayOf(oldDay).replace(/-/g, '')}`;
    expect(result.dropped).toContain(oldName);
    expect(result.dropped).not.toContain(`events_p${dayOf(keptDay).replace(/-/g, '')}`);
    const days = await partitionDays();
    expect(days).not.toContain(dayOf(oldDay));
    expect(days).toContain(dayOf(keptDay));
    const stored = (await t.db.query(`SELECT event_name FROM events WHERE app_id = $1`, [tenant.appId])) as {
      event_name: string;
    }[];
    expect(stored.map((r) => r.event_name)).toEqual(['Kept.event']);

    const res = await request(t.http)
      .get('/api/v1/rollups')
      .query({ appId: tenant.appId, fromDate: dayOf(oldDay), toDate: dayOf(oldDay) })
      .set(bearer(tenant.apiKey));
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      expect.objectContaining({
        date: dayOf(oldDay),
        eventName: null,
        events: 1,
        uniqueUsers: 1,
        final: true,
      }),
      expect.objectContaining({ date: dayOf(oldDay), eventName: 'Old.event', events: 1, final: true }),
    ]);
  });

  it('expires dedup records after the dedup window', async () => {
    const tenant = await makeTenant(t.app);
    const now = Date.now();
    await t.db.query(
      `INSERT INTO event_dedup (app_id, event_id, seen_at) VALUES ($1, 'old', $2), ($1, 'recent', $3)`,
      [tenant.appId, new Date(now - 7 * DAY - 60_000), new Date(now - 6 * DAY)],
    );
    expect(await t.app.get(DedupExpiryService).run(now)).toBeGreaterThanOrEqual(1);
    const rows = (await t.db.query(`SELECT event_id FROM event_dedup WHERE app_id = $1`, [tenant.appId])) as {
      event_id: string;
    }[];
    expect(rows.map((r) => r.event_id)).toEqual(['recent']);
  });
  it('indexes the user and session filters on days that have ended, not on today', async () => {
    const now = Date.now();
    const name = (t0: number) => `events_p${dayOf(t0).replace(/-/g, '')}`;
    await maintenance.run(now);
    const yesterday = name(now - DAY);
    const indexes = async (table: string) =>
      (
        (await t.db.query(
          `SELECT c.relname AS name FROM pg_index i
             JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class r ON r.oid = i.indrelid
            WHERE r.relname = $1 AND i.indisvalid`,
          [table],
        )) as { name: string }[]
      ).map((r) => r.name);
    expect(await indexes(yesterday)).toEqual(
      expect.arrayContaining([`${yesterday}_user`, `${yesterday}_session`]),
    );
    expect(await indexes(name(now))).not.toContain(`${name(now)}_user`);
    // A second run finds them built and builds nothing.
    expect((await maintenance.run(now)).indexed).toEqual([]);
  });
});
