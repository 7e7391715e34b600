import { readFileSync } from 'node:fs';
import { cliActor } from '@app/cli/actor';
import { uuid } from '@app/cli/arguments';
import { defineJsonCommand } from '@app/cli/command';
import { ExitCode, UsageError } from '@app/cli/exit-codes';
import { table } from '@app/cli/output';
import type { CliRuntime } from '@app/cli/runtime';
import { AppError } from '@app/common/app-error';
import type { IngestResult } from '@app/ingest/ingest.types';
import { maxEventsPerRequest } from '@app/ingest/ingest.limits';
import type { PlanProblem, Violation } from '@app/plans/plan.types';
import { ruleOf } from '@app/plans/plan-gate';

function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${path}: ${(err as Error).message}`);
  }
}

function readJson(path: string): unknown {
  try {
    return JSON.parse(readText(path)) as unknown;
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`${path} is not valid JSON: ${(err as Error).message}`);
  }
}

/** One event per line; blank lines are skipped. */
export function readNdjson(path: string): unknown[] {
  const events: unknown[] = [];
  readText(path)
    .split('\n')
    .forEach((line, i) => {
      if (line.trim() === '') return;
      try {
        events.push(JSON.parse(line));
      } catch (err) {
        throw new UsageError(`${path}:${i + 1} is not valid JSON: ${(err as Error).message}`);
      }
    });
  if (!events.length) throw new UsageError(`${path} holds no events`);
  return events;
}

/** An invalid plan as one usage line: every problem with its path. */
function planProblems(path: string, err: unknown): never {
  if (err instanceof AppError && err.code === 'invalid_plan') {
    const problems = (err.options.extra?.problems ?? []) as PlanProblem[];
    throw new UsageError(`${path}: ${problems.map((p) => `${p.path || '(plan)'}: ${p.message}`).join('; ')}`);
  }
  throw err;
}

export function plansGetCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'get',
    "Print an app's current tracking plan (version 0 and mode off when it has none).",
    [
      'tally plans get --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c',
      'tally plans get --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --json',
    ],
    '{ "appId", "version", "mode", "unplanned", "events", "createdAt" }',
  )
    .requiredOption('--app <appId>', 'the app', uuid)
    .action(async (options) => {
      const services = await rt.services('plans');
      await services.apps.assertExist([options.app]);
      const v = await services.plans().plans.get(options.app);
      const doc = { appId: v.appId, version: v.version, ...v.plan, createdAt: v.createdAt };
      rt.print({ json: doc, text: JSON.stringify(doc, null, 2) }, options.json);
    });
}

export function plansSetCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'set',
    "Store a new version of an app's tracking plan from a JSON file. Every instance applies it within " +
      'a second. An invalid plan is refused with every problem (exit 2) and nothing changes. With ' +
      '--if-match, the plan is stored only if the current version is still that one.',
    [
      'tally plans set --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --file plan.json',
      'tally plans set --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --file plan.json --if-match 3 --json',
    ],
    '{ "appId", "version", "mode", "unplanned", "events", "createdAt" }',
  )
    .requiredOption('--app <appId>', 'the app', uuid)
    .requiredOption('--file <path>', 'the plan, as JSON')
    .option('--if-match <version>', 'the version the change is based on (see tally plans get)', (v) => {
      if (!/^\d{1,9}$/.test(v)) throw new UsageError('--if-match takes a version number');
      return Number(v);
    })
    .action(async (options) => {
      const raw = readJson(options.file);
      const services = await rt.services('plans');
      await services.apps.assertExist([options.app]);
      const v = await services
        .plans()
        .plans.put(options.app, options.ifMatch ?? '*', raw, cliActor())
        .catch((err: unknown) => planProblems(options.file, err));
      const doc = { appId: v.appId, version: v.version, ...v.plan, createdAt: v.createdAt };
      rt.print(
        { json: doc, text: `Stored version ${v.version} of the plan (mode ${v.plan.mode}).` },
        options.json,
      );
    });
}

interface CheckRow {
  eventName: string;
  field: string;
  rule: string;
  code: string;
  severity: 'error' | 'warning';
  count: number;
}

/** The violations of the dry runs, by event name, field and rule, most frequent first. */
export function violationTable(
  events: unknown[],
  results: { offset: number; result: IngestResult }[],
): CheckRow[] {
  const rows = new Map<string, CheckRow>();
  for (const { offset, result } of results) {
    const issues = [
      ...result.errors.map((e) => ({ ...e, severity: 'error' as const })),
      ...result.warnings.map((w) => ({ ...w, severity: 'warning' as const })),
    ];
    for (const issue of issues) {
      if (issue.code !== 'schema_violation' && issue.code !== 'unplanned_event') continue;
      const event = events[offset + issue.index] as { eventName?: unknown };
      const eventName = typeof event?.eventName === 'string' ? event.eventName : '?';
      const rule = ruleOf(issue as Violation);
      const key = JSON.stringify([eventName, issue.field, rule, issue.severity]);
      const row = rows.get(key) ?? {
        eventName,
        field: issue.field,
        rule,
        code: issue.code,
        severity: issue.severity,
        count: 0,
      };
      row.count++;
      rows.set(key, row);
    }
  }
  const order = (r: CheckRow) => `${r.eventName}\u0000${r.field}\u0000${r.rule}`;
  return [...rows.values()].sort((a, b) => b.count - a.count || (order(a) < order(b) ? -1 : 1));
}

export function plansCheckCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'check',
    'Check the events of an NDJSON file (one event per line, as POST /api/ingest takes them) against ' +
      "the app's plan, or the plan in --plan, exactly as ingest would; nothing is stored. Prints the " +
      'violations by event name and rule. Exits 4 when an event would be rejected, for use in CI.',
    [
      'tally plans check --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --file events.ndjson',
      'tally plans check --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --file events.ndjson --plan plan.json --json',
    ],
    '{ "received", "accepted", "duplicates", "rejected", "violations": [{ "eventName", "field", "rule", "code", "severity", "count" }] }',
  )
    .requiredOption('--app <appId>', 'the app', uuid)
    .requiredOption('--file <path>', 'the events, one JSON object per line')
    .option('--plan <path>', 'a plan (JSON) to check against instead of the stored one')
    .action(async (options) => {
      const events = readNdjson(options.file);
      const plan = options.plan === undefined ? undefined : readJson(options.plan);
      const services = await rt.services('plans');
      await services.apps.assertExist([options.app]);
      const { check } = services.plans();
      const results: { offset: number; result: IngestResult }[] = [];
      const batch = maxEventsPerRequest(rt.config());
      for (let offset = 0; offset < events.length; offset += batch) {
        const result = await check(options.app, events.slice(offset, offset + batch), plan).catch(
          (err: unknown) => planProblems(options.plan ?? 'plan', err),
        );
        results.push({ offset, result });
      }
      const sum = (k: 'received' | 'accepted' | 'duplicates' | 'rejected') =>
        results.reduce((n, r) => n + r.result[k], 0);
      const violations = violationTable(events, results);
      const summary = {
        received: sum('received'),
        accepted: sum('accepted'),
        duplicates: sum('duplicates'),
        rejected: sum('rejected'),
      };
      const text = [
        table(
          ['EVENT', 'FIELD', 'RULE', 'SEVERITY', 'COUNT'],
          violations.map((v) => [v.eventName, v.field, v.rule, v.severity, String(v.count)]),
        ),
        '',
        `${summary.received} events: ${summary.accepted} accepted, ${summary.duplicates} duplicates, ${summary.rejected} rejected.`,
      ].join('\n');
      rt.print({ json: { ...summary, violations }, text }, options.json);
      if (summary.rejected > 0) rt.exitCode = ExitCode.Rejected;
    });
}
