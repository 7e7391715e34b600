/* global fetch, performance */
// `npm run bench -- --auth-refusals`: whether the answer time of a refused key tells which kind of
// refusal it was. Four kinds are sent in turn (an unknown key, a bad checksum, a revoked key, an
// expired key), so that the machine's load falls on all of them alike; the figure is the largest
// median over the smallest (target ≤ 1.3). Without the refusal floor the lookup of an unknown key
// takes about twice as long as a refusal from memory. Recorded in the `authRefusals` section of
// bench/results/latest.json (quick.json with --quick).
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { destroy, ensure, makeTemporaryDir } from '../../src/database/embedded-pg.mjs';
import { median } from '../../test/support/harness.js';
import { connect } from '../lib/db.mjs';
import { cli, freePort, startServer } from '../lib/processes.mjs';

const TARGET_RATIO = 1.3;

/** A key of the right shape whose checksum is wrong: refused before any lookup. */
function badChecksum(generateKey) {
  const key = generateKey('api');
  const last = key.at(-1) === 'a' ? 'b' : 'a';
  return key.slice(0, -1) + last;
}

async function refusalTimes(base, appId, kinds, rounds) {
  const times = Object.fromEntries(Object.keys(kinds).map((k) => [k, []]));
  for (let round = 0; round < rounds; round++) {
    for (const [kind, key] of Object.entries(kinds)) {
      const started = performance.now();
      const res = await fetch(`${base}/api/v1/events?appId=${appId}`, {
        headers: { authorization: `Bearer ${key()}` },
      });
      await res.arrayBuffer();
      times[kind].push(performance.now() - started);
      if (res.status !== 401) throw new Error(`a ${kind} key was answered ${res.status}, not 401`);
    }
  }
  return times;
}

export async function authRefusalsMain({ root, log, quick }) {
  const dist = path.join(root, 'dist');
  const { generateKey } = createRequire(import.meta.url)(path.join(dist, 'src', 'auth', 'key-format.js'));
  const dir = await makeTemporaryDir('auth-refusals');
  let server;
  try {
    const { url } = await ensure(dir, await freePort());
    const app = await cli(dist, url, ['apps', 'create', '--name', 'auth-refusals']);
    const revoked = await cli(dist, url, ['keys', 'create-api', '--app', app.id, '--scope', 'events:read']);
    await cli(dist, url, ['keys', 'revoke', revoked.id]);
    const expired = await cli(dist, url, ['keys', 'create-api', '--app', app.id, '--scope', 'events:read']);
    const db = await connect(url);
    await db.query(`UPDATE keys SET expires_at = now() - interval '1 second' WHERE id = $1`, [expired.id]);
    await db.end();
    // Every refusal goes through the same path: no address limit.
    server = await startServer({ dist, databaseUrl: url, env: { AUTH_FAILURE_LIMIT: '1000000' } });
    const kinds = {
      unknown: () => generateKey('api'),
      badChecksum: () => badChecksum(generateKey),
      revoked: () => revoked.key,
      expired: () => expired.key,
    };
    const times = await refusalTimes(server.baseUrl, app.id, kinds, quick ? 20 : 200);
    const mediansMs = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, median(v)]));
    const values = Object.values(mediansMs);
    const ratio = Math.max(...values) / Math.min(...values);
    const figures = { timestamp: new Date().toISOString(), quick, mediansMs, ratio, target: TARGET_RATIO };
    log(`auth refusals: ${JSON.stringify(figures)}`);
    const file = path.join(root, 'bench', 'results', quick ? 'quick.json' : 'latest.json');
    const results = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {};
    results.authRefusals = { ...figures, pass: ratio <= TARGET_RATIO };
    fs.writeFileSync(file, JSON.stringify(results, null, 2) + '\n');
    process.stdout.write(`\nResults: ${path.relative(root, file)} (authRefusals)\n`);
    return quick || ratio <= TARGET_RATIO ? 0 : 1;
  } finally {
    await server?.stop();
    await destroy(dir).catch(() => undefined);
  }
}
