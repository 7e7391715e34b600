import request from 'supertest';
import { RollupsService } from '@app/rollups/rollups.service';
import { bearer, makeTenant, postIngest } from './factories';
import { useTestApp } from './support/test-app';

describe('rollups of float values near the double range', () => {
  const t = useTestApp();
  it('saturates the sum instead of failing the day, and other apps are computed in the same run', async () => {
    const big = await makeTenant(t.app);
    const small = await makeTenant(t.app);
    const send = (key: string, events: object[]) => postIngest(t.http, key, { events });
    expect(
      (
        await send(big.liveKey, [
          { eventName: 'Huge.value', floatValue: 1.7e308 },
          { eventName: 'Huge.value', floatValue: 1.7e308 },
        ])
      ).body,
    ).toMatchObject({ accepted: 2 });
    expect((await send(small.liveKey, [{ eventName: 'Small.value', floatValue: 2.5 }])).body).toMatchObject({
      accepted: 1,
    });

    const result = await t.app.get(RollupsService).run();
    expect(result.status).toBe('computed');

    const rows = async (tenant: { appId: string; apiKey: string }, eventName: string) => {
      const res = await request(t.http)
        .get('/api/v1/rollups')
        .query({ appId: tenant.appId, range: '1d', eventName })
        .set(bearer(tenant.apiKey));
      expect(res.status).toBe(200);
      return res.body;
    };
    expect(await rows(big, 'Huge.value')).toEqual([
      expect.objectContaining({
        eventName: 'Huge.value',
        events: 2,
        floatValue: {
          count: 2,
          sum: Number.MAX_VALUE,
          min: 1.7e308,
          max: 1.7e308,
          avg: Number.MAX_VALUE / 2,
        },
      }),
    ]);
    expect(await rows(small, 'Small.value')).toEqual([
      expect.objectContaining({
        eventName: 'Small.value',
        events: 1,
        floatValue: { count: 1, sum: 2.5, min: 2.5, max: 2.5, avg: 2.5 },
      }),
    ]);
  });
});
