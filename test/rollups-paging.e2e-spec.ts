import request from 'supertest';
import { RollupsService } from '@app/rollups/rollups.service';
import { DAY_MS, utcDateString } from '@app/common/time';
import { bearer, makeTenant } from './factories';
import { seedEvents } from './factories/events';
import { useTestApp } from './support/test-app';
import { expectProblem } from './support/problem';

const MAX_ROWS = 7;

interface Row {
  date: string;
  eventName: string | null;
  isTestMode: boolean;
  events: number;
}

describe('GET /api/v1/rollups pages its answer', () => {
  const t = useTestApp({ ROLLUPS_MAX_ROWS: String(MAX_ROWS) });
  let tenant: Awaited<ReturnType<typeof makeTenant>>;
  const today = Date.now();
  const days = [2, 1, 0].map((n) => utcDateString(today - n * DAY_MS));

  beforeAll(async () => {
    tenant = await makeTenant(t.app);
    // Three days, five names, both modes: 3 × (5 + 1) × 2 = 36 rows.
    const seed = days.flatMap((day, d) =>
      ['b', 'a', 'é', 'B', 'a.b'].flatMap((name, i) =>
        [false, true].flatMap((isTestMode) =>
          Array.from({ length: 1 + ((i + d) % 3) }, () => ({
            eventName: name,
            isTestMode,
            receivedAt: Math.min(Date.parse(`${day}T12:00:00Z`), today),
          })),
        ),
      ),
    );
    await seedEvents(t.db, tenant.appId, seed);
    await t.app.get(RollupsService).compute({ appId: tenant.appId, from: days[0], to: days[2] });
  });

  const get = (query: Record<string, string>) =>
    request(t.http)
      .get('/api/v1/rollups')
      .query({ appId: tenant.appId, ...query })
      .set(bearer(tenant.apiKey));

  async function readAll(query: Record<string, string>) {
    const pages: Row[][] = [];
    let res = await get(query);
    for (;;) {
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      pages.push(res.body as Row[]);
      const cursor = res.headers['x-next-cursor'] as string | undefined;
      if (!cursor) {
        expect(res.headers.link).toBeUndefined();
        break;
      }
      expect(res.headers.link).toBe(
        `</api/v1/rollups?${new URLSearchParams({ appId: tenant.appId, ...query, cursor }).toString()}>; rel="next"`,
      );
      // Follow the Link, as a client that knows nothing of the cursor would.
      const next = /^<([^>]+)>/.exec(res.headers.link as string)![1];
      res = await request(t.http).get(next).set(bearer(tenant.apiKey));
    }
    return pages;
  }

  it('answers at most ROLLUPS_MAX_ROWS rows per page, in a stable order, with no row missing or repeated', async () => {
    const pages = await readAll({ range: '3d', testMode: 'all' });
    expect(pages.length).toBe(Math.ceil(36 / MAX_ROWS));
    for (const page of pages.slice(0, -1)) expect(page).toHaveLength(MAX_ROWS);
    const rows = pages.flat();

    const stored = (await t.db.query(
      `SELECT day::text AS date, nullif(event_name, '') AS "eventName", is_test_mode AS "isTestMode", events::int AS events
         FROM rollups WHERE app_id = $1 ORDER BY day, event_name COLLATE "C", is_test_mode`,
      [tenant.appId],
    )) as Row[];
    expect(stored).toHaveLength(36);
    expect(
      rows.map(({ date, eventName, isTestMode, events }) => ({ date, eventName, isTestMode, events })),
    ).toEqual(stored);
    // The same walk twice gives the same pages.
    expect(await readAll({ range: '3d', testMode: 'all' })).toEqual(pages);
  });

  it('pages with every filter, and a query that fits answers in one page without a cursor', async () => {
    expect((await readAll({ fromDate: days[0], toDate: days[2] })).flat()).toHaveLength(18);
    const one = await get({ range: '3d', eventName: 'a' });
    expect(one.status).toBe(200);
    expect(one.body).toHaveLength(3);
    expect(one.headers['x-next-cursor']).toBeUndefined();
  });

  it('400 invalid_cursor for a tampered, truncated, garbage or foreign cursor', async () => {
    const first = await get({ range: '3d', testMode: 'all' });
    const cursor = first.headers['x-next-cursor'] as string;
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    const flipped = cursor.slice(0, 3) + (cursor[3] === 'A' ? 'B' : 'A') + cursor.slice(4);
    for (const bad of [flipped, cursor.slice(0, -2), 'not-a-cursor', 'A'.repeat(40)]) {
      const res = await get({ range: '3d', testMode: 'all', cursor: bad });
      expectProblem(res, 400, 'invalid_cursor');
    }
    // A cursor only works for the query that produced it.
    expectProblem(await get({ range: '2d', testMode: 'all', cursor }), 400, 'invalid_cursor');
    expectProblem(await get({ range: '3d', testMode: 'true', cursor }), 400, 'invalid_cursor');
    const other = await makeTenant(t.app);
    const foreign = await request(t.http)
      .get('/api/v1/rollups')
      .query({ appId: other.appId, range: '3d', testMode: 'all', cursor })
      .set(bearer(other.apiKey));
    expectProblem(foreign, 400, 'invalid_cursor');
    // An events cursor is no rollups cursor.
    const events = await request(t.http)
      .get('/api/v1/events')
      .query({ appId: tenant.appId, limit: 1, testMode: 'all' })
      .set(bearer(tenant.apiKey));
    expectProblem(
      await get({ range: '3d', testMode: 'all', cursor: events.headers['x-next-cursor'] }),
      400,
      'invalid_cursor',
    );
  });

  it('400 invalid_query for a cursor longer than any rollups cursor', async () => {
    const res = await get({ range: '3d', cursor: 'A'.repeat(1201) });
    expectProblem(res, 400, 'invalid_query');
  });
});
