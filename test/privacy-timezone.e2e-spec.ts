import request from 'supertest';
import { AppsService } from '@app/auth/apps.service';
import { localDateString, localDayStart } from '@app/common/timezones';
import { RollupsService } from '@app/rollups/rollups.service';
import { TEST_ACTOR, bearer, makeApiKey, makeIngestKey, postIngest } from './factories';
import { waitFor } from './support/harness';
import { useTestApp } from './support/test-app';

const ZONE = 'America/New_York';
const HOUR = 3_600_000;

describe('erasure in an app with its own time zone, and in the export', () => {
  // A short export horizon, so that the events just sent can be exported at once.
  const t = useTestApp({ EXPORT_SETTLE_MS: '200' });

  it('recomputes the local days the erased events touched, leaving rows equal to a fresh computation', async () => {
    const app = await t.app.get(AppsService).create('Erasure in New York', TEST_ACTOR, ZONE);
    const ingestKey = (await makeIngestKey(t.app, app.id)).key;
    const readKey = (await makeApiKey(t.app, [app.id], ['rollups:read'])).key;
    const privacyKey = (await makeApiKey(t.app, [app.id], ['privacy:write', 'events:export'])).key;
    // Local midnight that began today in New York: events either side of it, and of the one before.
    const today = localDateString(Date.now(), ZONE);
    const midnight = localDayStart(today, ZONE);
    const times = [midnight - HOUR / 2, midnight + HOUR / 2].filter((ts) => ts < Date.now());
    const events = times.flatMap((ts, i) => [
      { eventName: 'Shop.viewed', anonymousUserId: 'kept-1', eventTime: ts, eventId: `k-${i}` },
      { eventName: 'Shop.viewed', anonymousUserId: 'gone-1', eventTime: ts, eventId: `g-${i}` },
      // A name only the erased user sent: its rows must leave the days it touched.
      { eventName: 'Only.gone', anonymousUserId: 'gone-1', eventTime: ts, eventId: `o-${i}` },
    ]);
    expect((await postIngest(t.http, ingestKey, { events })).body.accepted).toBe(events.length);
    const rollups = t.app.get(RollupsService);
    await rollups.compute({ appId: app.id });

    const read = async () => {
      const res = await request(t.http).get(`/api/v1/rollups?appId=${app.id}&range=3d`).set(bearer(readKey));
      expect(res.status).toBe(200);
      return (res.body as Record<string, unknown>[]).map(({ computedAt: _c, final: _f, ...row }) => row);
    };
    const before = await read();
    expect(before.some((r) => r.eventName === 'Only.gone')).toBe(true);

    const res = await request(t.http)
      .post('/api/v1/deletions')
      .set(bearer(privacyKey))
      .set('Content-Type', 'application/json')
      .send({ appId: app.id, anonymousUserIds: ['gone-1'] });
    expect(res.status).toBe(202);
    await waitFor(
      async () => {
        const status = await request(t.http).get(`/api/v1/deletions/${res.body.id}`).set(bearer(privacyKey));
        return status.body.status === 'done' ? status.body : null;
      },
      { timeoutMs: 30_000, what: 'the deletion to finish' },
    );

    const after = await read();
    expect(after.length).toBeGreaterThan(0);
    expect(after.every((r) => r.timezone === ZONE)).toBe(true);
    expect(after.some((r) => r.eventName === 'Only.gone')).toBe(false);
    expect(after.filter((r) => r.eventName === null).map((r) => r.uniqueUsers)).toEqual(
      after.filter((r) => r.eventName === null).map(() => 1),
    );
    // The export holds none of the user's events, and all of the others'.
    const exported = await request(t.http)
      .get(`/api/v1/export?appId=${app.id}&from=0`)
      .set(bearer(privacyKey));
    expect(exported.status).toBe(200);
    const users = exported.text
      .trim()
      .split('\n')
      .map((line) => (JSON.parse(line) as { anonymousUserId: string }).anonymousUserId);
    expect(users).toEqual(times.map(() => 'kept-1'));
    // A fresh computation of every day changes nothing.
    await rollups.compute({ appId: app.id });
    expect(await read()).toEqual(after);
  });
});
