import { randomUUID } from 'node:crypto';
import { makeTenant, postIngest } from './factories';
import { useTestApp } from './support/test-app';

describe('metering follows the key (decisions §11)', () => {
  const t = useTestApp();

  const ingest = (key: string, events: unknown[]) => postIngest(t.http, key, JSON.stringify({ events }));

  it('meters every accepted event of a live key, isTestMode:true included; the flag still separates the data', async () => {
    const tenant = await makeTenant(t.app);
    const res = await ingest(tenant.liveKey, [
      { eventName: 'Billed.flagged', isTestMode: true, eventId: randomUUID() },
      { eventName: 'Billed.flagged', isTestMode: true },
      { eventName: 'Billed.plain', isTestMode: false },
      { eventName: '' },
    ]);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ received: 4, accepted: 3, rejected: 1, metered: 3, testMode: false });
    const rows = (await t.db.query(
      `SELECT event_name, is_test_mode FROM events WHERE app_id = $1 ORDER BY event_name, id`,
      [tenant.appId],
    )) as { event_name: string; is_test_mode: boolean }[];
    expect(rows.map((r) => [r.event_name, r.is_test_mode])).toEqual([
      ['Billed.flagged', true],
      ['Billed.flagged', true],
      ['Billed.plain', false],
    ]);
  });

  it('meters duplicates of a live key zero times, and a test key never', async () => {
    const tenant = await makeTenant(t.app);
    const id = randomUUID();
    const first = await ingest(tenant.liveKey, [{ eventName: 'Once', isTestMode: true, eventId: id }]);
    expect(first.body).toMatchObject({ accepted: 1, metered: 1 });
    const again = await ingest(tenant.liveKey, [{ eventName: 'Once', isTestMode: true, eventId: id }]);
    expect(again.body).toMatchObject({ accepted: 0, duplicates: 1, metered: 0 });
    const test = await ingest(tenant.testKey, [{ eventName: 'Free', isTestMode: false }]);
    expect(test.body).toMatchObject({ accepted: 1, metered: 0, testMode: true });
  });
});
