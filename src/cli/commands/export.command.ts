import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { Option } from '@commander-js/extra-typings';
import { uuid } from '@app/cli/arguments';
import { defineJsonCommand } from '@app/cli/command';
import { UsageError } from '@app/cli/exit-codes';
import type { CliRuntime } from '@app/cli/runtime';
import { EXPORT_FORMATS, type ExportFormat } from '@app/export/export-format';
import type { ExportPlan, ExportService } from '@app/export/export.service';

// A dropped database connection or a failover: the chunk is read again from the same position,
// after a pause that doubles up to 30 s, about five minutes in all.
const RETRIES = 12;

interface Progress {
  events: number;
  bytes: number;
}

/** Streams the plan's body into `out`, waiting for it to drain; reports progress per piece. */
async function writeExport(
  service: ExportService,
  plan: ExportPlan,
  out: Writable,
  onPiece: (p: Progress) => void,
  onRetry: (err: unknown) => void,
): Promise<Progress> {
  const progress: Progress = { events: 0, bytes: 0 };
  async function* counted<T>(chunks: AsyncIterable<T>, rows: (chunk: T) => number) {
    for await (const chunk of chunks) {
      progress.events += rows(chunk);
      yield chunk;
    }
  }
  const options = { retries: RETRIES, onRetry };
  // Loaded here, not at the top: the command line is parsed (and --help shown) without it.
  const { ndjsonBody, parquetBody, writeBody } =
    require('../../export/export-body') as typeof import('../../export/export-body');
  const body =
    plan.format === 'parquet'
      ? parquetBody(
          counted(service.copyChunks(plan, options), (chunk) => chunk.rows),
          plan,
        )
      : ndjsonBody(counted(service.ndjsonChunks(plan, options), (chunk) => chunk.rows));
  await writeBody(body, out, (bytes) => {
    progress.bytes += bytes;
    onPiece(progress);
  });
  return progress;
}

export function exportCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'export',
    "Export an app's raw events received in [--from, --to) as NDJSON or Parquet, ascending by receive time, " +
      'reading the database directly. --to defaults to, and may not pass, the export horizon (now − EXPORT_SETTLE_MS). ' +
      'A dropped database connection is resumed where it stopped. Progress goes to stderr on a terminal.',
    [
      'tally export --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --from 2026-11-21T10:00:00Z --to 2026-11-21T11:00:00Z --out events.ndjson',
      'tally export --app 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c --from 2026-11-21 --to 2026-11-22 --format parquet --out day.parquet',
    ],
    '{ "appId", "from", "to", "format", "out", "events", "bytes" } (needs --out)',
  )
    .requiredOption('--app <appId>', 'the app', uuid)
    .requiredOption('--from <time>', 'start of the window on receive time, inclusive: epoch ms or ISO-8601')
    .option('--to <time>', 'end of the window, exclusive (default: the export horizon)')
    .addOption(new Option('--format <format>', 'ndjson or parquet').choices(EXPORT_FORMATS).default('ndjson'))
    .option('--test-mode <mode>', 'false (live events, default), true or all')
    .option('--out <file>', 'write to this file (default: stdout, NDJSON only)')
    .action(async (options) => {
      const format = options.format as ExportFormat;
      if (!options.out && (format === 'parquet' || options.json)) {
        throw new UsageError(
          `--out is required with ${format === 'parquet' ? '--format parquet' : '--json'}`,
        );
      }
      const services = await rt.services('export');
      await services.apps.assertExist([options.app]);
      const service = services.exports();
      const plan = await service.plan({
        appId: options.app,
        from: options.from,
        to: options.to,
        format,
        testMode: testMode(options.testMode),
      });
      const out = options.out ? createWriteStream(options.out) : process.stdout;
      const tty = Boolean(process.stderr.isTTY);
      const line = (p: Progress) => `\r${p.events} events, ${(p.bytes / 1_048_576).toFixed(1)} MB`;
      const result = await writeExport(
        service,
        plan,
        out,
        (p) => tty && rt.io.stderr(line(p)),
        (err) => rt.io.stderr(`\ntally: ${(err as Error).message.split('\n')[0]}; resuming\n`),
      );
      if (tty) rt.io.stderr(line(result) + '\n');
      if (out !== process.stdout) {
        out.end();
        await once(out, 'close');
        const { fromMs, toMs } = plan.window;
        rt.print(
          {
            json: { appId: options.app, from: fromMs, to: toMs, format, out: options.out, ...result },
            text: `Exported ${result.events} events (${result.bytes} bytes) received in [${new Date(fromMs).toISOString()}, ${new Date(toMs).toISOString()}) to ${options.out}.`,
          },
          options.json,
        );
      }
    });
}

function testMode(value: string | undefined): 'false' | 'true' | 'all' | undefined {
  if (value === undefined || value === 'false' || value === 'true' || value === 'all') return value;
  throw new UsageError(`--test-mode must be false, true or all, got "${value}"`);
}
