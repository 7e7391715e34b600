import fs from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import { RollupsService } from '@app/rollups/rollups.service';
import { bearer, makeTenant, postIngest } from './factories';
import { PROBLEM_SCHEMA_REF } from '@app/common/openapi';
import { buildOpenApiDocument } from '@app/ops/openapi';
import { DrainState } from '@app/ops/drain-state';
import { useTestApp } from './support/test-app';
import { Contract, RequestContract } from './support/contract';

// `UPDATE_OPENAPI=1 npx jest test/openapi.e2e-spec.ts` rewrites the committed copy after an
// intended API change; review the diff like any other.
const COMMITTED = path.join(__dirname, '..', 'docs', 'openapi.json');
const UPDATE = process.env.UPDATE_OPENAPI === '1';

const serialize = (doc: unknown) => JSON.stringify(doc, null, 2) + '\n';

type Operation = {
  security?: Record<string, string[]>[];
  responses: Record<string, { content?: Record<string, unknown> }>;
};

describe('OpenAPI document', () => {
  const t = useTestApp();
  let served: Record<string, unknown> & { paths: Record<string, Record<string, Operation>> };

  beforeAll(async () => {
    const res = await request(t.http).get('/openapi.json');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    served = res.body;
  });

  it('GET /openapi.json serves the document buildOpenApiDocument generates', () => {
    expect(served).toEqual(JSON.parse(JSON.stringify(buildOpenApiDocument(t.app))));
  });

  it('matches the committed docs/openapi.json', () => {
    if (UPDATE) fs.writeFileSync(COMMITTED, serialize(served));
    expect(fs.existsSync(COMMITTED)).toBe(true);
    // Compared as text so that the failure shows the exact lines that changed.
    expect(serialize(served)).toBe(fs.readFileSync(COMMITTED, 'utf8'));
  });

  it('is OpenAPI 3.1 with both bearer schemes, Segment’s Basic scheme, the problem schema and servers', () => {
    expect(served.openapi).toBe('3.1.0');
    expect(served.info).toEqual(expect.objectContaining({ title: 'Tally', version: '1.0.0' }));
    expect(served.servers).toEqual([expect.objectContaining({ url: '{baseUrl}' })]);
    const components = served.components as {
      securitySchemes: Record<string, unknown>;
      schemas: Record<string, { required?: string[]; properties?: Record<string, { enum?: string[] }> }>;
    };
    expect(components.securitySchemes).toEqual({
      ingestKey: expect.objectContaining({ type: 'http', scheme: 'bearer' }),
      apiKey: expect.objectContaining({ type: 'http', scheme: 'bearer' }),
      segmentWriteKey: expect.objectContaining({ type: 'http', scheme: 'basic' }),
    });
    const problem = components.schemas.Problem;
    expect(problem.required).toEqual(['type', 'title', 'status', 'detail', 'code', 'requestId']);
    expect(problem.properties?.code.enum).toEqual(
      expect.arrayContaining(['invalid_key', 'insufficient_scope', 'rate_limited', 'service_unavailable']),
    );
  });

  it('covers every endpoint and error status of the interface, with problem+json errors', () => {
    const expected: [string, string, string, number[]][] = [
      ['/api/ingest', 'post', 'ingestKey', [200, 401, 413, 429]],
      ['/api/v1/events', 'get', 'apiKey', [200, 401, 403]],
      ['/api/v1/rollups', 'get', 'apiKey', [200, 401, 403]],
      ['/api/v1/key', 'get', 'apiKey', [200, 401, 429]],
    ];
    for (const [route, method, scheme, statuses] of expected) {
      const operation = served.paths[route]?.[method];
      expect({ route, documented: Boolean(operation) }).toEqual({ route, documented: true });
      expect({ route, security: operation.security }).toEqual({ route, security: [{ [scheme]: [] }] });
      for (const status of statuses) {
        const response = operation.responses[String(status)];
        expect({ route, status, documented: Boolean(response) }).toEqual({ route, status, documented: true });
        if (status >= 400) {
          expect({ route, status, content: response.content }).toEqual({
            route,
            status,
            content: { 'application/problem+json': { schema: { $ref: PROBLEM_SCHEMA_REF } } },
          });
        }
      }
    }
    for (const route of ['/healthz', '/readyz', '/metrics']) {
      expect({ route, security: served.paths[route]?.get?.security }).toEqual({ route, security: undefined });
    }
  });
});

describe('contract checks', () => {
  const t = useTestApp({ AUTH_FAILURE_LIMIT: '1000' });
  let contract: Contract;

  beforeAll(async () => {
    contract = new Contract(t.app);
  });

  it('accept a conforming response and reject one that is not documented or does not match', async () => {
    const ok = await request(t.http).get('/healthz');
    contract.expect(ok, 'get', '/healthz');

    const notDocumented = { ...ok, status: 418 } as request.Response;
    expect(() => contract.expect(notDocumented, 'get', '/healthz')).toThrow(/documents no 418 response/);

    const wrongBody = { ...ok, body: { status: 'fine', extra: 1 } } as request.Response;
    expect(() => contract.expect(wrongBody, 'get', '/healthz')).toThrow(/does not match the OpenAPI schema/);

    expect(() => contract.expect(ok, 'get', '/nowhere')).toThrow(/no operation GET \/nowhere/);
  });

  it('validate problem+json error bodies against the Problem schema', async () => {
    t.app.get(DrainState).begin();
    const res = await request(t.http).get('/readyz');
    expect(res.status).toBe(503);
    contract.expect(res, 'get', '/readyz');

    const broken = { ...res, body: { ...res.body, code: 'no_such_code' } } as request.Response;
    expect(() => contract.expect(broken, 'get', '/readyz')).toThrow(/\/code must be equal to one of/);
  });
  it('validate a success and an error of every API endpoint against the document', async () => {
    const tenant = await makeTenant(t.app);
    const ingest = (key: string, body: unknown) => postIngest(t.http, key, body);

    const accepted = await ingest(tenant.liveKey, {
      events: [
        {
          eventName: 'Checkout.completed',
          eventId: 'c-1',
          anonymousUserId: 'u1',
          floatValue: 9.5,
          payload: { plan: 'pro' },
        },
        { eventName: 'Checkout.completed', privacyMode: 'unlinked' },
        { eventName: 42 },
      ],
    });
    expect(accepted.status).toBe(200);
    expect(accepted.body).toMatchObject({ received: 3, accepted: 2, rejected: 1 });
    contract.expect(accepted, 'post', '/api/ingest');
    contract.expect(await ingest(tenant.apiKey, { events: [{ eventName: 'A.b' }] }), 'post', '/api/ingest');
    contract.expect(await ingest(tenant.liveKey, { events: [] }), 'post', '/api/ingest');

    const events = await request(t.http)
      .get('/api/v1/events')
      .query({ appId: tenant.appId })
      .set(bearer(tenant.apiKey));
    expect(events.status).toBe(200);
    expect(events.body).toHaveLength(2);
    contract.expect(events, 'get', '/api/v1/events');
    const badLimit = await request(t.http)
      .get('/api/v1/events')
      .query({ appId: tenant.appId, limit: 0 })
      .set(bearer(tenant.apiKey));
    expect(badLimit.status).toBe(400);
    contract.expect(badLimit, 'get', '/api/v1/events');

    await t.app.get(RollupsService).compute({ appId: tenant.appId });
    const rollups = await request(t.http)
      .get('/api/v1/rollups')
      .query({ appId: tenant.appId })
      .set(bearer(tenant.apiKey));
    expect(rollups.status).toBe(200);
    expect(rollups.body.length).toBeGreaterThanOrEqual(2);
    contract.expect(rollups, 'get', '/api/v1/rollups');
    const forbidden = await request(t.http)
      .get('/api/v1/rollups')
      .query({ appId: '00000000-0000-4000-8000-000000000000' })
      .set(bearer(tenant.apiKey));
    expect(forbidden.status).toBe(403);
    contract.expect(forbidden, 'get', '/api/v1/rollups');
  });

  it('judge requests: an ingest batch per event, and the query of a read', () => {
    const requests = new RequestContract(contract.document);
    const batch = requests.verdict(
      'POST',
      '/api/ingest',
      {
        events: [
          {
            eventName: 'A.b',
            platform: 'ios',
            floatValue: 1.5,
            isTestMode: true,
            payload: { n: 1, s: 'x', b: false },
          },
          { eventName: 'A.b', platform: 5 },
          { eventName: 'A.b', payload: { nested: { no: 1 } } },
        ],
        sentAt: 1,
      },
      true,
    );
    expect(batch).toMatchObject({ valid: true, problems: [] });
    expect(batch?.events?.[0]).toBeNull();
    expect(batch?.events?.[1]).toMatch(/platform/);
    expect(batch?.events?.[2]).toMatch(/payload/);
    expect(requests.verdict('POST', '/api/ingest', { events: 'nope' }, true)?.valid).toBe(false);
    expect(requests.verdict('POST', '/api/ingest', undefined, false)?.problems).toEqual(['body is not JSON']);

    const appId = '00000000-0000-4000-8000-000000000000';
    expect(requests.verdict('GET', `/api/v1/events?appId=${appId}&limit=10`, undefined, true)?.valid).toBe(
      true,
    );
    expect(
      requests.verdict('GET', `/api/v1/events?appId=${appId}&colour=red`, undefined, true)?.problems,
    ).toEqual(['query parameter colour is not documented']);
    expect(requests.verdict('GET', '/api/v1/events', undefined, true)?.valid).toBe(false);
    expect(requests.verdict('GET', '/nowhere', undefined, true)).toBeNull();
  });
});
