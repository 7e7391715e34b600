// Ports, processes and waiting, for the Jest specs (TypeScript, loaded as CommonJS) and for the
// plain Node scripts of test/ and bench/ (ESM, which import CommonJS named exports). Types are in
// harness.d.ts. Waits here wait on a condition; `sleep` is only for pacing, never for a condition.
'use strict';
const net = require('node:net');
const { spawn } = require('node:child_process');

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** A pause of `ms`. For pacing (a request rate, a randomised kill time), never in place of a condition. */
function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Resolves with the first truthy value of `check` (called again every `intervalMs` until then), or
 * rejects naming `what` after `timeoutMs`. The timeout is a deadline for a condition that is
 * expected to hold much sooner, not a measure of speed.
 */
async function waitFor(check, { timeoutMs = 30_000, intervalMs = 20, what = 'a condition' } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** The middle value (the upper one of an even count). */
function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/**
 * Resolves with everything `stream` printed once a chunk of it matches `pattern`; rejects when
 * `child` exits first or after `timeoutMs`.
 */
function waitForOutput(child, pattern, { timeoutMs = 60_000, streams = ['stdout', 'stderr'] } = {}) {
  return new Promise((resolve, reject) => {
    let out = '';
    const done = (fn, value) => {
      clearTimeout(timer);
      child.off('exit', onExit);
      for (const name of streams) child[name]?.off('data', onData);
      fn(value);
    };
    const onData = (chunk) => {
      out += chunk;
      if (pattern.test(out)) done(resolve, out);
    };
    const onExit = (code, signal) =>
      done(reject, new Error(`exited (${signal ?? code}) before ${pattern}:\n${out}`));
    const timer = setTimeout(
      () => done(reject, new Error(`no ${pattern} within ${timeoutMs} ms:\n${out}`)),
      timeoutMs,
    );
    for (const name of streams) child[name]?.on('data', onData);
    child.once('exit', onExit);
  });
}

/**
 * Starts `node <script>` with `env` on top of this process's environment and waits for `ready`
 * in its output (default: the server's "Tally listening" line). `kill()` signals it (SIGTERM by
 * default) and resolves once it has exited.
 */
async function startNodeProcess(
  script,
  { env = {}, args = [], cwd, ready = /Tally listening/, timeoutMs = 60_000 } = {},
) {
  const child = spawn(process.execPath, [script, ...args], {
    cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  if (ready) {
    try {
      await waitForOutput(child, ready, { timeoutMs });
    } catch (err) {
      child.kill('SIGKILL');
      throw err;
    }
  }
  return {
    child,
    exited,
    output: () => output,
    async kill(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** The value of one sample line of a Prometheus exposition, or undefined. */
function sample(text, name, labels = {}) {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const present = (match[3] ?? '').split(/,(?=[a-zA-Z_]+=")/);
    if (wanted.every((w) => present.includes(w))) return Number(match[4]);
  }
  return undefined;
}

module.exports = { freePort, sleep, waitFor, median, waitForOutput, startNodeProcess, sample };
