// Robustness figures: `npm run bench -- --robustness` sends 100,000 generated requests (5,000
// with --quick) to a server on the benchmark's cluster and records what came back. The requests
// and the pass/fail rule are the CI test's (test/robustness/).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeRobustnessTenant, runRobustness } from '../../test/robustness/run.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * `npm run bench -- --robustness`: 100,000 cases (5,000 with --quick) against a server on the
 * benchmark's cluster; the figures go into bench/results/latest.json (quick.json) under
 * `robustness`, beside the other figures. Resolves with the exit code.
 */
export async function robustnessMode({ dist, cluster, quick, log, stopCluster, resultsDir }) {
  const { cli, startServer } = await import('../lib/processes.mjs');
  let server;
  let result;
  try {
    const tenant = await makeRobustnessTenant(cli, dist, cluster.url);
    server = await startServer({ dist, databaseUrl: cluster.url });
    result = await runRobustness({ baseUrl: server.baseUrl, tenant, cases: quick ? 5_000 : 100_000, log });
  } finally {
    await server?.stop();
    await stopCluster(cluster.dir).catch(() => undefined);
    if (cluster.temporary) fs.rmSync(cluster.dir, { recursive: true, force: true });
    fs.rmSync(dist, { recursive: true, force: true });
  }
  const file = path.join(resultsDir, quick ? 'quick.json' : 'latest.json');
  const results = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {};
  results.robustness = { timestamp: new Date().toISOString(), ...result };
  fs.writeFileSync(file, JSON.stringify(results, null, 2) + '\n');
  const ok = result.serverErrors === 0 && result.transportErrors === 0 && result.malformedProblems === 0;
  log(
    `robustness: ${result.cases} cases in ${result.seconds.toFixed(0)} s: ${result.serverErrors} 5xx, ` +
      `${result.transportErrors} transport errors, ${result.malformedProblems} 4xx without a problem code`,
  );
  process.stdout.write(`\nResults: ${path.relative(ROOT, file)} (robustness)\n`);
  return ok ? 0 : 1;
}
