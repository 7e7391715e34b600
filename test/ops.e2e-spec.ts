import request from 'supertest';
import { DrainState } from '@app/ops/drain-state';
import { MetricsService } from '@app/common/metrics/metrics.service';
import { RollupsScheduler } from '@app/rollups/rollups.scheduler';
import { makeTenant, postIngest } from './factories';
import { startTestApp, useTestApp } from './support/test-app';
import { Contract } from './support/contract';
import { expectProblem } from './support/problem';
import { sample } from './support/harness';

describe('health, readiness and metrics', () => {
  const t = useTestApp();
  let contract: Contract;

  beforeAll(async () => {
    contract = new Contract(t.app);
  });

  it('GET /healthz answers 200 without a key, touching nothing', async () => {
    const res = await request(t.http).get('/healthz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['x-request-id']).toEqual(expect.any(String));
    expect(res.headers['content-security-policy']).toBe("default-src 'none';frame-ancestors 'none'");
    contract.expect(res, 'get', '/healthz');
  });

  it('GET /readyz checks the database and answers 200 when ready', async () => {
    const res = await request(t.http).get('/readyz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      status: 'ok',
      checks: { shutdown: { status: 'up' }, database: { status: 'up' } },
    });
    contract.expect(res, 'get', '/readyz');
  });

  it('GET /metrics serves Prometheus text with request counts by route template and status', async () => {
    const tenant = await makeTenant(t.app);
    const healthz = { method: 'GET', route: '/healthz', status: '200' };
    const before = (await request(t.http).get('/metrics').expect(200)).text;
    await request(t.http).get('/healthz').expect(200);
    // Unauthenticated reads: a 401 whose route is the template, never the raw URL with its query.
    await request(t.http).get('/api/v1/events').query({ appId: tenant.appId }).expect(401);
    await request(t.http).get(`/no/such/path/${tenant.appId}`).expect(404);

    const res = await request(t.http).get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    contract.expect(res, 'get', '/metrics');
    const text = res.text;
    expect(sample(text, 'tally_http_requests_total', healthz)).toBe(
      (sample(before, 'tally_http_requests_total', healthz) ?? 0) + 1,
    );
    expect(
      sample(text, 'tally_http_requests_total', { method: 'GET', route: '/api/v1/events', status: '401' }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      sample(text, 'tally_http_requests_total', { method: 'GET', route: 'unmatched', status: '404' }),
    ).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'tally_http_request_duration_seconds_count', healthz)).toBe(
      sample(text, 'tally_http_requests_total', healthz),
    );
    expect(sample(text, 'tally_http_request_duration_seconds_bucket', { ...healthz, le: '+Inf' })).toBe(
      sample(text, 'tally_http_requests_total', healthz),
    );
    // No tenant data: neither the app id from the URLs nor raw query strings become labels.
    expect(text).not.toContain(tenant.appId);
    expect(text).not.toContain('appId');
    // Pool usage of both DataSources, and the default process metrics.
    expect(sample(text, 'tally_db_pool_connections', { pool: 'primary' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'tally_db_pool_idle_connections', { pool: 'primary' })).toEqual(expect.any(Number));
    expect(sample(text, 'tally_db_pool_waiting_requests', { pool: 'primary' })).toBe(0);
    expect(sample(text, 'tally_db_pool_connections', { pool: 'read' })).toEqual(expect.any(Number));
    expect(sample(text, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
  });

  it('MetricsService counts ingest outcomes and rollup runs', async () => {
    const metrics = t.app.get(MetricsService);
    metrics.recordIngest({
      accepted: 97,
      duplicates: 1,
      rejectedByCode: { invalid_type: 2, event_too_old: 1 },
      testMode: false,
    });
    metrics.recordIngest({ accepted: 3, duplicates: 0, rejectedByCode: {}, testMode: true });
    metrics.observeRollupRun({ seconds: 0.4, lagSeconds: 12, outcome: 'completed' });
    metrics.observeRollupRun({ seconds: 0.01, outcome: 'skipped' });

    const text = (await request(t.http).get('/metrics').expect(200)).text;
    expect(sample(text, 'tally_events_accepted_total', { mode: 'live' })).toBe(97);
    expect(sample(text, 'tally_events_accepted_total', { mode: 'test' })).toBe(3);
    expect(sample(text, 'tally_events_duplicate_total', { mode: 'live' })).toBe(1);
    expect(sample(text, 'tally_events_rejected_total', { code: 'invalid_type', mode: 'live' })).toBe(2);
    expect(sample(text, 'tally_events_rejected_total', { code: 'event_too_old', mode: 'live' })).toBe(1);
    expect(sample(text, 'tally_rollup_run_duration_seconds_count', { outcome: 'completed' })).toBe(1);
    expect(sample(text, 'tally_rollup_run_duration_seconds_sum', { outcome: 'completed' })).toBeCloseTo(0.4);
    expect(sample(text, 'tally_rollup_run_duration_seconds_count', { outcome: 'skipped' })).toBe(1);
    expect(sample(text, 'tally_rollup_lag_seconds')).toBe(12);
    expect(sample(text, 'tally_rollup_last_success_timestamp_seconds')).toBeGreaterThan(1.7e9);
  });

  it('ingest batches and scheduled rollup runs reach /metrics', async () => {
    const tenant = await makeTenant(t.app);
    const before = (await request(t.http).get('/metrics').expect(200)).text;
    const value = (text: string, name: string, labels: Record<string, string> = {}) =>
      sample(text, name, labels) ?? 0;
    const res = await postIngest(t.http, tenant.liveKey, {
      events: [{ eventName: 'A.one' }, { eventName: 'A.two' }, { eventName: 7 }],
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ accepted: 2, rejected: 1 });
    await t.app.get(RollupsScheduler).tick();
    const after = (await request(t.http).get('/metrics').expect(200)).text;
    const delta = (name: string, labels: Record<string, string> = {}) =>
      value(after, name, labels) - value(before, name, labels);
    expect(delta('tally_events_accepted_total', { mode: 'live' })).toBe(2);
    expect(delta('tally_events_rejected_total', { code: 'invalid_type', mode: 'live' })).toBe(1);
    expect(
      delta('tally_rollup_run_duration_seconds_count', { outcome: 'completed' }) +
        delta('tally_rollup_run_duration_seconds_count', { outcome: 'skipped' }),
    ).toBe(1);
  });

  it('GET /docs serves the interactive reference with a CSP that lets it load', async () => {
    const res = await request(t.http).get('/docs');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.text).toContain('swagger-ui-bundle.js');
    const csp = res.headers['content-security-policy'];
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self' 'unsafe-inline'");
    const init = await request(t.http).get('/docs/swagger-ui-init.js');
    expect(init.status).toBe(200);
    expect(init.text).toContain('"openapi": "3.1.0"');
    expect((await request(t.http).get('/docs/swagger-ui-bundle.js')).status).toBe(200);
  });
});

describe('readiness failures', () => {
  it('answers 503 with failed shutdown while draining, and asks clients to close the connection', async () => {
    const t = await startTestApp();
    try {
      t.app.get(DrainState).begin();
      const res = await request(t.http).get('/readyz');
      expectProblem(res, 503, 'service_unavailable');
      expect(res.body.failed).toEqual(['shutdown']);
      expect(res.headers['retry-after']).toBe('5');
      expect(res.headers.connection).toBe('close');
      new Contract(t.app).expect(res, 'get', '/readyz');
      // Liveness is unaffected: the process is healthy, only leaving.
      expect((await request(t.http).get('/healthz')).status).toBe(200);
    } finally {
      await t.close();
    }
  });
});
