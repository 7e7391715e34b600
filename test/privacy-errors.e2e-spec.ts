import request from 'supertest';
import { bearer, makeApiKey, makeApp, makeIngestKey } from './factories';
import { expectProblem } from './support/problem';
import { useTestApp } from './support/test-app';

const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';

describe('deletions: every error of the contract', () => {
  const t = useTestApp({ READ_RATE_REQUESTS: '1000000', AUTH_FAILURE_LIMIT: '1000000' });
  let appId: string;
  let otherAppId: string;
  let key: string;
  let otherKey: string;
  let readKey: string;
  let ingestKey: string;
  let otherDeletion: string;

  beforeAll(async () => {
    appId = (await makeApp(t.app)).id;
    otherAppId = (await makeApp(t.app)).id;
    key = (await makeApiKey(t.app, [appId], ['privacy:write'])).key;
    otherKey = (await makeApiKey(t.app, [otherAppId], ['privacy:write'])).key;
    readKey = (await makeApiKey(t.app, [appId], ['events:read', 'rollups:read'])).key;
    ingestKey = (await makeIngestKey(t.app, appId)).key;
    const res = await post(otherKey, { appId: otherAppId, anonymousUserIds: ['someone'], suppress: false });
    expect(res.status).toBe(202);
    otherDeletion = res.body.id;
  });

  function post(k: string | null, body: unknown, type = 'application/json') {
    const req = request(t.http).post('/api/v1/deletions').set('Content-Type', type);
    if (k) req.set(bearer(k));
    return req.send(typeof body === 'string' ? body : JSON.stringify(body));
  }

  describe('401 and 403', () => {
    it('401 invalid_key without a key, on every route', async () => {
      expectProblem(await post(null, { appId, anonymousUserIds: ['u'] }), 401, 'invalid_key');
      expectProblem(await request(t.http).get(`/api/v1/deletions?appId=${appId}`), 401, 'invalid_key');
      expectProblem(await request(t.http).get(`/api/v1/deletions/${UNKNOWN_ID}`), 401, 'invalid_key');
    });

    it('401 wrong_key_type for an ingest key', async () => {
      const res = await post(ingestKey, { appId, anonymousUserIds: ['u'] });
      expectProblem(res, 401, 'wrong_key_type');
    });

    it('403 insufficient_scope for a key without privacy:write', async () => {
      const res = await post(readKey, { appId, anonymousUserIds: ['u'] });
      expectProblem(res, 403, 'insufficient_scope');
      expect(res.body.requiredScope).toBe('privacy:write');
      const list = await request(t.http).get(`/api/v1/deletions?appId=${appId}`).set(bearer(readKey));
      expectProblem(list, 403, 'insufficient_scope');
      const one = await request(t.http).get(`/api/v1/deletions/${otherDeletion}`).set(bearer(readKey));
      expectProblem(one, 403, 'insufficient_scope');
    });

    it('403 app_forbidden for an app the key cannot see (body or query)', async () => {
      expectProblem(await post(key, { appId: otherAppId, anonymousUserIds: ['u'] }), 403, 'app_forbidden');
      expectProblem(await post(key, { appId: UNKNOWN_ID, anonymousUserIds: ['u'] }), 403, 'app_forbidden');
      const list = await request(t.http).get(`/api/v1/deletions?appId=${otherAppId}`).set(bearer(key));
      expectProblem(list, 403, 'app_forbidden');
    });
  });

  describe('400', () => {
    const cases: [string, unknown, string, string][] = [
      ['no ids', { appId: 'APP', anonymousUserIds: [] }, 'anonymousUserIds', 'invalid_value'],
      [
        '1,001 ids',
        { appId: 'APP', anonymousUserIds: Array.from({ length: 1001 }, (_, i) => `u${i}`) },
        'anonymousUserIds',
        'invalid_value',
      ],
      ['ids missing', { appId: 'APP' }, 'anonymousUserIds', 'missing_field'],
      ['ids not an array', { appId: 'APP', anonymousUserIds: 'u1' }, 'anonymousUserIds', 'invalid_type'],
      [
        'an id not a string',
        { appId: 'APP', anonymousUserIds: ['u1', 7] },
        'anonymousUserIds[1]',
        'invalid_type',
      ],
      ['an empty id', { appId: 'APP', anonymousUserIds: [''] }, 'anonymousUserIds[0]', 'invalid_value'],
      [
        'an id of 201 characters',
        { appId: 'APP', anonymousUserIds: ['x'.repeat(201)] },
        'anonymousUserIds[0]',
        'invalid_value',
      ],
      [
        'suppress not a boolean',
        { appId: 'APP', anonymousUserIds: ['u'], suppress: 'yes' },
        'suppress',
        'invalid_type',
      ],
      ['appId missing', { anonymousUserIds: ['u'] }, 'appId', 'missing_field'],
      ['appId a number', { appId: 7, anonymousUserIds: ['u'] }, 'appId', 'invalid_type'],
      ['appId not a UUID', { appId: 'nope', anonymousUserIds: ['u'] }, 'appId', 'invalid_format'],
    ];
    it.each(cases)('invalid_body for %s, and nothing is stored', async (_name, body, field, code) => {
      const withApp = JSON.parse(JSON.stringify(body).replace('"APP"', JSON.stringify(appId)));
      const res = await post(key, withApp);
      expectProblem(res, 400, 'invalid_body');
      expect(res.body.errors).toEqual([{ field, code, message: expect.any(String) }]);
      const list = await request(t.http).get(`/api/v1/deletions?appId=${appId}`).set(bearer(key));
      expect(list.body).toEqual([]);
    });

    it('invalid_body for a body that is not an object, invalid_json for one that is not JSON', async () => {
      expectProblem(await post(key, '[1]'), 400, 'invalid_body');
      expectProblem(await post(key, '{"appId":'), 400, 'invalid_json');
    });

    it('415 for a body that is not application/json', async () => {
      expectProblem(await post(key, 'appId=x', 'text/plain'), 415, 'unsupported_media_type');
    });

    it('invalid_query for a list without appId', async () => {
      const res = await request(t.http).get('/api/v1/deletions').set(bearer(key));
      expectProblem(res, 400, 'invalid_query');
    });
  });

  describe('404', () => {
    it('an unknown id, a malformed id and another app’s deletion get the same answer', async () => {
      const answers = [];
      for (const id of [UNKNOWN_ID, 'not-a-uuid', otherDeletion]) {
        const res = await request(t.http).get(`/api/v1/deletions/${id}`).set(bearer(key));
        expectProblem(res, 404, 'not_found');
        const { requestId: _r, instance: _i, ...rest } = res.body;
        answers.push(rest);
      }
      expect(answers[1]).toEqual(answers[0]);
      expect(answers[2]).toEqual(answers[0]);
      // The owner sees it.
      const own = await request(t.http).get(`/api/v1/deletions/${otherDeletion}`).set(bearer(otherKey));
      expect(own.status).toBe(200);
      expect(own.body.id).toBe(otherDeletion);
    });
  });
});
