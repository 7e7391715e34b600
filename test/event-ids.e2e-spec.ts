import request from 'supertest';
import { bearer, makeTenant, postIngest } from './factories';
import { useTestApp } from './support/test-app';

const list = (http: Parameters<typeof request>[0], appId: string, key: string, extra = {}) =>
  request(http)
    .get('/api/v1/events')
    .query({ appId, ...extra })
    .set(bearer(key));

describe('event ids in answers reveal no counter shared by apps', () => {
  const t = useTestApp({ READ_RATE_REQUESTS: '1000' });

  it("two apps' interleaved events show ids that carry none of the shared sequence", async () => {
    const a = await makeTenant(t.app);
    const b = await makeTenant(t.app);
    // Interleaved, so the stored ids of each app are not consecutive: B's event takes a number
    // between A's two, which a shared counter would show.
    for (const [tenant, name] of [
      [a, 'A.first'],
      [b, 'B.only'],
      [a, 'A.second'],
    ] as const) {
      expect((await postIngest(t.http, tenant.liveKey, { events: [{ eventName: name }] })).status).toBe(200);
    }
    const aIds = (await list(t.http, a.appId, a.apiKey)).body.map((e: { id: string }) => e.id);
    const bIds = (await list(t.http, b.appId, b.apiKey)).body.map((e: { id: string }) => e.id);
    expect(aIds).toHaveLength(2);
    expect(bIds).toHaveLength(1);
    const stored = (await t.db.query(
      `SELECT id::text AS id FROM events WHERE app_id = ANY($1::uuid[]) ORDER BY id`,
      [[a.appId, b.appId]],
    )) as { id: string }[];
    expect(stored).toHaveLength(3);
    // The sequence is shared (A, B, A in that order) ...
    expect(BigInt(stored[2].id) - BigInt(stored[0].id)).toBeGreaterThanOrEqual(2n);
    // ... but no answer shows a number of it: opaque, fixed-length ids with none of the digits.
    for (const id of [...aIds, ...bIds]) {
      expect(id).toMatch(/^[A-Za-z0-9_-]{22}$/);
      expect(id).not.toMatch(/^\d+$/);
      for (const s of stored) expect(id).not.toContain(s.id);
    }
    // The cursor shows nothing of it either.
    const page = await list(t.http, a.appId, a.apiKey, { limit: 1 });
    const cursor = Buffer.from(page.headers['x-next-cursor'] as string, 'base64url');
    for (const s of stored) {
      const raw = Buffer.alloc(8);
      raw.writeBigInt64BE(BigInt(s.id));
      expect(cursor.includes(raw)).toBe(false);
    }
    const next = await list(t.http, a.appId, a.apiKey, { limit: 1, cursor: page.headers['x-next-cursor'] });
    expect(next.status).toBe(200);
    expect(next.body.map((e: { id: string }) => e.id)).toEqual([aIds[1]]);
  });

  it('the same event shows the same id on every read', async () => {
    const a = await makeTenant(t.app);
    await postIngest(t.http, a.liveKey, { events: [{ eventName: 'x' }, { eventName: 'y' }] });
    const first = (await list(t.http, a.appId, a.apiKey)).body.map((e: { id: string }) => e.id);
    const again = (await list(t.http, a.appId, a.apiKey)).body.map((e: { id: string }) => e.id);
    expect(again).toEqual(first);
  });
});
