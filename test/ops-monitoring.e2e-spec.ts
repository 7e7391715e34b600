import fs from 'node:fs';
import path from 'node:path';
import request from 'supertest';
import { DrainState } from '@app/ops/drain-state';
import { RollupsScheduler } from '@app/rollups/rollups.scheduler';
import { makeTenant, postIngest } from './factories';
import { testReplicaUrl, useTestApp } from './support/test-app';

const DEPLOY = path.join(__dirname, '..', 'deploy');
const GRAFANA = path.join(DEPLOY, 'grafana', 'tally.json');
const ALERTS = path.join(DEPLOY, 'prometheus', 'alerts.yml');
const METRIC_NAME = /\b(?:tally|nodejs|process)_[a-z0-9_]+\b/g;
const HISTOGRAM_SUFFIX = /_(bucket|sum|count)$/;

interface GrafanaDashboard {
  panels: { type: string; targets?: { expr: string }[] }[];
  templating: { list: { definition?: string }[] };
}

/** Every PromQL expression of the Grafana dashboard. */
function grafanaExpressions(): string[] {
  const dashboard = JSON.parse(fs.readFileSync(GRAFANA, 'utf8')) as GrafanaDashboard;
  return [
    ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)),
    ...dashboard.templating.list.flatMap((v) => (v.definition ? [v.definition] : [])),
  ];
}

/** The metric families an exposition declares, by name, with their type. */
function families(exposition: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const match of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) out.set(match[1], match[2]);
  return out;
}

/** Whether `name` is a series the exposition can produce (a histogram's _bucket, _sum, _count included). */
function exported(name: string, declared: Map<string, string>): boolean {
  if (declared.has(name)) return true;
  const base = name.replace(HISTOGRAM_SUFFIX, '');
  return base !== name && declared.get(base) === 'histogram';
}

describe('Grafana dashboard and Prometheus alert rules (deploy/)', () => {
  // With a read replica, so that the replica routing's metrics are exported too.
  const t = useTestApp({
    ROLLUPS_ENABLED: 'true',
    ROLLUP_INTERVAL_SECONDS: '3600',
    DATABASE_READ_URL: testReplicaUrl(),
  });
  let exposition: string;

  beforeAll(async () => {
    const tenant = await makeTenant(t.app);
    const ingest = await postIngest(t.http, tenant.liveKey, {
      events: [{ eventName: 'App.opened' }, { eventName: 7 }],
    });
    expect(ingest.status).toBe(200);
    await t.app.get(RollupsScheduler).tick();
    const res = await request(t.http).get('/metrics');
    expect(res.status).toBe(200);
    exposition = res.text;
  });

  it('every metric the dashboard and the rules name is exported by a running Tally', () => {
    const declared = families(exposition);
    const named = new Set([
      ...grafanaExpressions().flatMap((e) => e.match(METRIC_NAME) ?? []),
      ...(fs.readFileSync(ALERTS, 'utf8').match(METRIC_NAME) ?? []),
    ]);
    // Guards against a pattern that silently matches nothing.
    expect(named.size).toBeGreaterThanOrEqual(20);
    const missing = [...named].filter((name) => !exported(name, declared)).sort();
    expect(missing).toEqual([]);
  });

  it('the route label the ingest panels and alert select is the one /metrics reports', () => {
    expect(exposition).toMatch(/^tally_http_requests_total\{[^}]*route="\/api\/ingest"[^}]*\} \d+/m);
    expect(exposition).toMatch(/^tally_http_request_duration_seconds_bucket\{[^}]*route="\/api\/ingest"/m);
    expect(grafanaExpressions().join('\n')).toContain('route="/api/ingest"');
    expect(fs.readFileSync(ALERTS, 'utf8')).toContain('route="/api/ingest"');
  });

  it('reports readiness, the in-flight budget, the heap cap and the rollup interval', async () => {
    const value = (text: string, name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
    expect(value(exposition, 'tally_ready')).toBe(1);
    expect(value(exposition, 'tally_ingest_inflight_bytes')).toBe(0);
    expect(value(exposition, 'tally_ingest_inflight_limit_bytes')).toBe(t.config.ingestMaxInflightBytes);
    expect(value(exposition, 'tally_heap_limit_bytes')).toBeGreaterThan(0);
    expect(value(exposition, 'tally_rollup_interval_seconds')).toBe(3600);
    t.app.get(DrainState).begin();
    const draining = (await request(t.http).get('/metrics')).text;
    expect(value(draining, 'tally_ready')).toBe(0);
  });
});
