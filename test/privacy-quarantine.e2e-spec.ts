import request from 'supertest';
import { bearer, makeApiKey, makeApp, makeIngestKey, postIngest } from './factories';
import { waitFor } from './support/harness';
import { useTestApp } from './support/test-app';

describe('erasure reaches the quarantine', () => {
  const t = useTestApp();

  it("deletes the users' quarantined events and leaves the others", async () => {
    const appId = (await makeApp(t.app)).id;
    const ingestKey = (await makeIngestKey(t.app, appId)).key;
    const key = (await makeApiKey(t.app, [appId], ['plans:write', 'events:read', 'privacy:write'])).key;
    const plan = await request(t.http)
      .put(`/api/v1/plan?appId=${appId}`)
      .set(bearer(key))
      .set('If-Match', '"0"')
      .send({ mode: 'enforce', unplanned: 'reject', events: {} });
    expect(plan.status).toBe(200);
    const sent = await postIngest(t.http, ingestKey, {
      events: [
        { eventName: 'Not.planned', anonymousUserId: 'gone-q', eventId: 'q-1' },
        { eventName: 'Not.planned', anonymousUserId: 'kept-q', eventId: 'q-2' },
      ],
    });
    expect(sent.body).toEqual(expect.objectContaining({ accepted: 0, rejected: 2 }));
    const quarantined = async () => {
      const res = await request(t.http).get(`/api/v1/quarantine?appId=${appId}`).set(bearer(key));
      expect(res.status).toBe(200);
      return (res.body as { anonymousUserId: string; code: string }[]).map((r) => r.anonymousUserId).sort();
    };
    expect(await quarantined()).toEqual(['gone-q', 'kept-q']);

    const deletion = await request(t.http)
      .post('/api/v1/deletions')
      .set(bearer(key))
      .send({ appId, anonymousUserIds: ['gone-q'] });
    expect(deletion.status).toBe(202);
    await waitFor(
      async () => {
        const res = await request(t.http).get(`/api/v1/deletions/${deletion.body.id}`).set(bearer(key));
        return res.body.status === 'done';
      },
      { timeoutMs: 30_000, what: 'the deletion to finish' },
    );
    expect(await quarantined()).toEqual(['kept-q']);
    const stored = await t.db.query(`SELECT count(*)::int AS n FROM quarantine WHERE app_id = $1`, [appId]);
    expect(stored).toEqual([{ n: 1 }]);
  });
});
