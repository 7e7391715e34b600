// Targets, pass/fail, the table printed at the end of a run, and a CPU profile summary.
import fs from 'node:fs';
import path from 'node:path';

const fmt = (v, digits = 0) =>
  v === null || v === undefined || Number.isNaN(v)
    ? 'n/a'
    : Number(v).toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/**
 * The targets of docs/performance.md. `get` reads the measured value from the results; a target
 * whose figure was not measured in this run (e.g. --skip-reads) is reported as not measured.
 */
export const TARGETS = [
  {
    id: 'client_track_ns',
    label: 'TallyClient.track() per event',
    unit: 'ns',
    op: '<=',
    value: 2000,
    get: (r) => r.client?.trackNsPerEvent,
  },
  {
    id: 'client_vs_raw_ingest',
    label: 'TallyClient end to end vs raw-HTTP ingest (same run)',
    unit: '×',
    op: '>=',
    value: 0.9,
    digits: 2,
    get: (r) => r.client?.vsRawIngest,
  },
  {
    id: 'ingest_events_per_sec',
    label: 'Ingest, 100-event batches, 64 connections',
    unit: 'events/s',
    op: '>=',
    value: 50_000,
    get: (r) => r.ingest?.batch100_c64?.eventsPerSec,
  },
  {
    id: 'ingest_p99_ms',
    label: 'Ingest p99 at 64 connections',
    unit: 'ms',
    op: '<=',
    value: 150,
    get: (r) => r.ingest?.batch100_c64?.latencyMs?.p99,
  },
  {
    id: 'ingest_errors',
    label: 'Ingest errors (all ingest runs)',
    unit: '',
    op: '<=',
    value: 0,
    get: (r) => r.ingest?.totalErrors,
  },
  {
    id: 'ingest_vs_db_ceiling',
    label: 'ingest_vs_db_ceiling',
    unit: '',
    op: '>=',
    value: 0.6,
    digits: 2,
    get: (r) => r.ratios?.ingest_vs_db_ceiling,
  },
  {
    id: 'validator_events_per_sec',
    label: 'Event validator, one core, 10% invalid',
    unit: 'events/s',
    op: '>=',
    value: 500_000,
    get: (r) => r.validation?.eventsPerSec,
  },
  {
    id: 'events_page_p50_ms',
    label: 'Events page (limit 1000) p50, worst of no filter / eventName / 10th page',
    unit: 'ms',
    op: '<=',
    value: 30,
    digits: 1,
    get: (r) => worst(r, 'p50'),
  },
  {
    id: 'events_page_p99_ms',
    label: 'Events page (limit 1000) p99, worst of no filter / eventName / 10th page',
    unit: 'ms',
    op: '<=',
    value: 100,
    digits: 1,
    get: (r) => worst(r, 'p99'),
  },
  {
    id: 'rollups_30d_p50_ms',
    label: 'Rollups range=30d p50',
    unit: 'ms',
    op: '<=',
    value: 10,
    digits: 1,
    get: (r) => r.reads?.rollups30d?.latencyMs?.p50,
  },
  {
    id: 'rollup_full_seconds',
    label: 'Rollup recompute, 30 days of the 2M-event app',
    unit: 's',
    op: '<=',
    value: 20,
    digits: 2,
    get: (r) => r.rollups?.full?.seconds,
  },
  {
    id: 'rollup_incremental_seconds',
    label: 'Rollup incremental run after 10k new events',
    unit: 's',
    op: '<=',
    value: 2,
    digits: 2,
    get: (r) => r.rollups?.incremental?.seconds,
  },
  {
    id: 'peak_rss_mb',
    label: 'Server peak RSS during ingest',
    unit: 'MB',
    op: '<=',
    value: 300,
    get: (r) => r.memory?.peakRssMb,
  },
  {
    id: 'cli_help_seconds',
    label: 'tally --help (median of 5, --cli)',
    unit: 's',
    op: '<=',
    value: 0.3,
    digits: 1,
    get: (r) => r.cli?.commands?.help?.medianSeconds,
  },
  {
    id: 'cli_apps_list_seconds',
    label: 'tally apps list --json, cluster up (median of 5, --cli)',
    unit: 's',
    op: '<=',
    value: 1.0,
    digits: 1,
    get: (r) => r.cli?.commands?.appsListClusterUp?.medianSeconds,
  },
];

function worst(r, p) {
  const pages = [r.reads?.eventsPage, r.reads?.eventsPageByName, r.reads?.eventsTenthPage];
  const values = pages.map((x) => x?.latencyMs?.[p]).filter((v) => typeof v === 'number');
  return values.length === 3 ? Math.max(...values) : undefined;
}

export function evaluateTargets(results) {
  return TARGETS.map((t) => {
    const measured = t.get(results);
    const known = typeof measured === 'number' && Number.isFinite(measured);
    const pass = known ? (t.op === '>=' ? measured >= t.value : measured <= t.value) : null;
    return {
      id: t.id,
      label: t.label,
      target: `${t.op} ${fmt(t.value, t.digits ?? 0)} ${t.unit}`.trim(),
      measured: known ? measured : null,
      unit: t.unit,
      pass,
    };
  });
}

function table(header, rows) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) =>
    cells
      .map((c, i) => String(c).padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

function loadRow(name, r) {
  if (!r) return [name, 'n/a', '', '', '', '', ''];
  return [
    name,
    r.eventsPerSec !== undefined ? fmt(r.eventsPerSec) : '',
    fmt(r.requestsPerSec),
    fmt(r.latencyMs?.p50, 1),
    fmt(r.latencyMs?.p99, 1),
    `${r.errors + r.timeouts}/${r.non2xx}`,
    r.rows ? `${fmt(r.rows.delta)} = ${fmt(r.totals?.accepted)}` : '',
  ];
}

export function renderSummary(results) {
  const out = [];
  const m = results.machine;
  out.push(
    `Tally benchmark (${results.mode}) at ${results.commit.slice(0, 12)}${results.dirty ? ' (uncommitted changes)' : ''}, ` +
      `${m.cores} cores, Node ${m.node}, PostgreSQL ${m.postgres}, ${fmt(results.durationSeconds)} s`,
  );
  out.push('');
  const i = results.ingest ?? {};
  const h = results.httpCeiling ?? {};
  out.push(
    table(
      ['Load run', 'events/s', 'req/s', 'p50 ms', 'p99 ms', 'err/non2xx', 'rows Δ = accepted'],
      [
        loadRow('ingest 100/batch, 16 conn', i.batch100_c16),
        loadRow('ingest 100/batch, 64 conn', i.batch100_c64),
        loadRow('ingest 1000/batch, 16 conn', i.batch1000_c16),
        loadRow('ingest 100/batch gzip, 64 conn', i.gzip100_c64),
        loadRow('bare node:http, 16 conn', h.c16),
        loadRow('bare node:http, 64 conn', h.c64),
      ],
    ),
  );
  if (results.dbCeiling) {
    out.push('');
    for (const d of results.dbCeiling.runs ?? [results.dbCeiling]) {
      out.push(
        `DB ceiling (${d.connections} connections, ${d.batchSize}-row statements): ${fmt(d.rowsPerSec)} rows/s, ` +
          `statement p50 ${fmt(d.batchLatencyMs?.p50, 1)} ms, p99 ${fmt(d.batchLatencyMs?.p99, 1)} ms`,
      );
    }
  }
  if (results.ratios) {
    out.push(
      `ingest_vs_db_ceiling = ${fmt(results.ratios.ingest_vs_db_ceiling, 2)}, ` +
        `ingest_vs_http_ceiling = ${fmt(results.ratios.ingest_vs_http_ceiling, 3)}`,
    );
  }
  if (results.reads?.eventsPage) {
    const r = results.reads;
    out.push('');
    out.push(
      table(
        ['Read', 'p50 ms', 'p99 ms', 'max ms', 'rows'],
        [
          ['events limit=1000', r.eventsPage, r.eventsPage.rows],
          ['events limit=1000 eventName', r.eventsPageByName, r.eventsPageByName.rows],
          ['events 10th cursor page', r.eventsTenthPage, r.eventsTenthPage.rows],
          ['rollups range=30d', r.rollups30d, r.rollups30d.rows],
        ].map(([name, x, rows]) => [
          name,
          fmt(x.latencyMs.p50, 1),
          fmt(x.latencyMs.p99, 1),
          fmt(x.latencyMs.max, 1),
          fmt(rows),
        ]),
      ),
    );
  }
  out.push('');
  out.push(
    table(
      ['Target', 'goal', 'measured', 'result'],
      results.targets.map((t) => [
        t.label,
        t.target,
        t.measured === null ? 'not measured' : fmt(t.measured, t.unit === '' || t.unit === 's' ? 2 : 1),
        t.pass === null ? '-' : t.pass ? 'PASS' : 'FAIL',
      ]),
    ),
  );
  const failed = results.correctness.filter((c) => !c.pass);
  out.push('');
  out.push(
    failed.length
      ? `Correctness: ${failed.length} of ${results.correctness.length} checks FAILED:\n` +
          failed.map((c) => `  - ${c.check}: ${c.detail}`).join('\n')
      : `Correctness: all ${results.correctness.length} checks passed.`,
  );
  return out.join('\n');
}

/** Self time per function (and where it lives) of the V8 CPU profile written by process `pid`. */
export function hottestFunctions(dir, pid, top = 25) {
  const file = fs.existsSync(dir) ? fs.readdirSync(dir).find((f) => f.includes(`.${pid}.`)) : undefined;
  if (!file) return null;
  const profile = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  const deltas = profile.timeDeltas;
  let total = 0;
  profile.samples.forEach((id, i) => {
    const { functionName, url, lineNumber } = byId.get(id).callFrame;
    const where = url ? `${url.replace(/^.*\/(node_modules|dist-\d+)\//, '$1/')}:${lineNumber + 1}` : '';
    const key = `${functionName || '(anonymous)'} ${where}`.trim();
    const dt = deltas[i] ?? 0;
    total += dt;
    self.set(key, (self.get(key) ?? 0) + dt);
  });
  return {
    file: path.join(dir, file),
    totalMs: Math.round(total / 1000),
    top: [...self.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([fn, us]) => ({
        fn,
        selfMs: Math.round(us / 1000),
        share: Math.round((us / total) * 1000) / 10,
      })),
  };
}

/** Records one section of bench/results/latest.json (a `--cli` or `--timezones` run), keeping the rest. */
export function saveResultsSection(root, name, section, fileName = 'latest.json') {
  const file = path.join(root, 'bench', 'results', fileName);
  let results = { schema: 1 };
  try {
    results = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    /* no full run recorded yet */
  }
  results[name] = section;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(results, null, 2) + '\n');
}
