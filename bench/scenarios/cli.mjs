// `npm run bench -- --cli`: how long the admin CLI takes, as whole processes, for what an operator
// types most. Each figure is the median of 5 runs after one warm-up run. The figures go into the
// `cli` section of bench/results/latest.json (the rest of the file is kept), and a full run carries
// that section over.
//
// The cluster is an embedded PostgreSQL in a temporary folder, used the way an operator's machine
// uses it: the server creates it, then the CLI runs with that server attached (it only connects),
// through DATABASE_URL, and last with no server running (the CLI starts the cluster and stops it
// again).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connectionUrl, stop as stopCluster } from '../../src/database/embedded-pg.mjs';
import { freePort, startServer } from '../lib/processes.mjs';
import { saveResultsSection } from '../lib/report.mjs';

const RUNS = 5;
const WARMUP = 1;

export const CLI_TARGETS = {
  help: 0.3,
  appsListClusterUp: 1.0,
};

const TICKS_PER_SECOND = 100;

/** CPU seconds used so far by this process's finished children (Linux: cutime + cstime). */
function childCpuSeconds() {
  try {
    const fields = fs.readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
    return (Number(fields[13]) + Number(fields[14])) / TICKS_PER_SECOND;
  } catch {
    return NaN;
  }
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * Runs the CLI once; resolves with its wall time and CPU time (user + system, its own child
 * processes included) in seconds, its exit code and its output. The CPU time varies less than
 * the wall time on a busy machine.
 */
function runOnce(bin, args, env) {
  return new Promise((resolve, reject) => {
    const cpuBefore = childCpuSeconds();
    const started = process.hrtime.bigint();
    const child = spawn(process.execPath, [bin, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      resolve({ seconds, cpuSeconds: childCpuSeconds() - cpuBefore, code, stdout, stderr });
    });
  });
}

async function measure(bin, args, env, check) {
  const seconds = [];
  const cpu = [];
  for (let i = 0; i < WARMUP + RUNS; i++) {
    const run = await runOnce(bin, args, env);
    if (run.code !== 0) throw new Error(`tally ${args.join(' ')} exited ${run.code}: ${run.stderr.trim()}`);
    check?.(run.stdout);
    if (i >= WARMUP) {
      seconds.push(run.seconds);
      cpu.push(run.cpuSeconds);
    }
  }
  return {
    command: `tally ${args.join(' ')}`,
    runs: RUNS,
    medianSeconds: median(seconds),
    minSeconds: Math.min(...seconds),
    maxSeconds: Math.max(...seconds),
    medianCpuSeconds: median(cpu),
  };
}

// --json must be exactly one JSON document.
const oneJsonArray = (stdout) => {
  if (!Array.isArray(JSON.parse(stdout))) throw new Error('expected a JSON array on stdout');
};

export async function runCliBenchmark({ root, log, git }) {
  const bin = path.join(root, 'dist/src/cli/main.js');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tally-bench-cli-'));
  fs.chmodSync(dir, 0o755);
  const base = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    LOG_LEVEL: 'warn',
    EMBEDDED_PG_DIR: dir,
    EMBEDDED_PG_PORT: String(await freePort()),
  };
  const commands = {};
  const loadBefore = os.loadavg()[0];
  let server;
  try {
    commands.help = await measure(bin, ['--help'], base);
    log(`tally --help: ${commands.help.medianSeconds.toFixed(3)} s`);
    commands.keysRotateHelp = await measure(bin, ['keys', 'rotate', '--help'], base);

    server = await startServer({
      dist: path.join(root, 'dist'),
      databaseUrl: undefined,
      env: { EMBEDDED_PG_DIR: dir, EMBEDDED_PG_PORT: base.EMBEDDED_PG_PORT },
    });
    for (let i = 0; i < 3; i++) await runOnce(bin, ['seed', '--json'], base);
    commands.appsListClusterUp = await measure(bin, ['apps', 'list', '--json'], base, oneJsonArray);
    log(`apps list, cluster up: ${commands.appsListClusterUp.medianSeconds.toFixed(3)} s`);
    commands.keysListClusterUp = await measure(bin, ['keys', 'list', '--json'], base, oneJsonArray);

    const port = Number(fs.readFileSync(path.join(dir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[3]);
    const direct = { ...base, DATABASE_URL: connectionUrl(port) };
    commands.appsListDatabaseUrl = await measure(bin, ['apps', 'list', '--json'], direct, oneJsonArray);
    log(`apps list, DATABASE_URL: ${commands.appsListDatabaseUrl.medianSeconds.toFixed(3)} s`);

    // No server: each run starts the cluster (which the server created), and stops it as the last
    // one out.
    await server.stop();
    server = undefined;
    commands.appsListColdCluster = await measure(bin, ['apps', 'list', '--json'], base, oneJsonArray);
    log(`apps list, no server running: ${commands.appsListColdCluster.medianSeconds.toFixed(3)} s`);
  } finally {
    await server?.stop();
    await stopCluster(dir).catch(() => undefined);
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const targets = Object.entries(CLI_TARGETS).map(([name, limit]) => ({
    command: commands[name].command,
    target: `<= ${limit} s`,
    medianSeconds: commands[name].medianSeconds,
    pass: commands[name].medianSeconds <= limit,
  }));
  return {
    timestamp: new Date().toISOString(),
    commit: git(['rev-parse', 'HEAD']),
    node: process.version,
    cores: os.cpus().length,
    // The machine's 1-minute load average around the runs: figures from a busy machine are slower.
    loadAverage: { before: loadBefore, after: os.loadavg()[0] },
    commands,
    targets,
  };
}

/** `npm run bench -- --cli`: measures, prints, and records the `cli` section of latest.json. */
export async function cliBenchmarkMain({ root, log, git }) {
  const cli = await runCliBenchmark({ root, log, git });
  saveResultsSection(root, 'cli', cli);
  const rows = Object.entries(cli.commands).map(
    ([name, c]) =>
      `  ${name.padEnd(20)} ${c.command.padEnd(26)} median ${c.medianSeconds.toFixed(3)} s  (min ${c.minSeconds.toFixed(3)}, max ${c.maxSeconds.toFixed(3)}), CPU ${c.medianCpuSeconds.toFixed(2)} s`,
  );
  process.stdout.write(
    [
      `Admin CLI, median of ${RUNS} runs, load average ${cli.loadAverage.before.toFixed(1)} → ${cli.loadAverage.after.toFixed(1)} on ${cli.cores} cores`,
      ...rows,
      ...cli.targets.map((t) => `  target ${t.command} ${t.target}: ${t.pass ? 'pass' : 'FAIL'}`),
      '\nResults: bench/results/latest.json (section "cli")',
    ].join('\n') + '\n',
  );
  return cli.targets.every((t) => t.pass) ? 0 : 1;
}
