// The SDK wire formats (`npm run bench -- --sdk-formats [--quick]`): 100-message Segment and
// PostHog batches at 64 connections against native 100-event batches of the same events, on one
// server, in the same run. Records the `sdkFormats` section of bench/results/latest.json
// (quick.json with --quick).
//
// Each format sends what its SDKs send: Segment with the write key as HTTP Basic user name,
// PostHog with `api_key` in the body (no header, so the body is read before the key is known).
// A batch of a mobile or browser SDK holds one device's events, so `segment` and `posthog` carry
// one account id per batch (Segment: `userId` beside `anonymousId`); `segmentMixed` and
// `posthogMixed` carry one per event, as a server-side relay's batch does, so that every event
// costs an HMAC of its own.
// Rounds alternate the five formats (and which goes first), so that a slow spell of the shared
// machine falls on all of them; each side's server CPU per accepted event is read from the
// scheduler. The figures are the medians over the rounds, and each ratio to native is the median
// of the rounds' own ratios (a format against the native run of its round).
//
// With --profile, each format runs instead on a server of its own under --cpu-prof (a warm-up and
// one round), and the run prints each profile by layer (profile-layers.mjs; the SDK formats'
// mapping is a layer of its own), to compare where an event of each format goes. It records
// nothing: the profiler's own cost and its wall-time samples make these figures no record.
import fs from 'node:fs';
import path from 'node:path';
import { recreateDatabase, withDatabase } from '../lib/db.mjs';
import { makeEvent, rng } from '../lib/events.mjs';
import { runLoad } from '../lib/load.mjs';
import { preciseCpuSecondsOf, startServer } from '../lib/processes.mjs';
import { CACHE, check, correctness, flags, makeTenant } from '../lib/common.mjs';
import { profileLayers } from './profile-layers.mjs';

const ID_SLOT = '\u0001ID\u0001';
const BATCH = 100;
const CONNECTIONS = 64;

function segmentMessage(e, account) {
  const context = { os: { name: e.platform } };
  if (e.appVersion) context.app = { version: e.appVersion };
  if (e.deviceModel) context.device = { model: e.deviceModel };
  if (e.locale) context.locale = e.locale;
  if (e.timezone) context.timezone = e.timezone;
  const properties = { ...e.payload };
  if (e.floatValue !== undefined) properties.value = e.floatValue;
  return {
    type: 'track',
    event: e.eventName,
    messageId: e.eventId,
    anonymousId: e.anonymousUserId,
    userId: account ?? `acct-${e.anonymousUserId}`,
    timestamp: new Date(e.eventTime).toISOString(),
    properties,
    context,
  };
}

function postHogEvent(e, account) {
  const properties = { ...e.payload, $session_id: e.sessionId, $os: e.platform };
  if (e.appVersion) properties.$app_version = e.appVersion;
  if (e.deviceModel) properties.$device_model = e.deviceModel;
  if (e.locale) properties.$locale = e.locale;
  if (e.timezone) properties.$timezone = e.timezone;
  if (e.floatValue !== undefined) properties.value = e.floatValue;
  return {
    event: e.eventName,
    uuid: e.eventId,
    distinct_id: account ?? `acct-${e.anonymousUserId}`,
    timestamp: new Date(e.eventTime).toISOString(),
    properties,
  };
}

/** A body split around its ids, so that a unique body costs one string join (as bench/lib/events.mjs). */
function template(seed, format, key) {
  const r = rng(seed);
  const events = Array.from({ length: BATCH }, () => makeEvent(r, ID_SLOT));
  const sentAt = new Date().toISOString();
  // One device's batch: one account; a relay's: the account of each event.
  const account = format.endsWith('Mixed') ? undefined : `acct-${seed}`;
  const body =
    format === 'native'
      ? { events }
      : format.startsWith('segment')
        ? { batch: events.map((e) => segmentMessage(e, account)), sentAt }
        : { api_key: key, batch: events.map((e) => postHogEvent(e, account)), sent_at: sentAt };
  const parts = JSON.stringify(body).split(JSON.stringify(ID_SLOT));
  return (tag) => {
    let out = parts[0];
    for (let i = 1; i < parts.length; i++) out += `"${tag}.${i - 1}"` + parts[i];
    return out;
  };
}

const PATHS = {
  native: '/api/ingest',
  segment: '/api/segment/v1/batch',
  segmentMixed: '/api/segment/v1/batch',
  posthog: '/api/posthog/batch/',
  posthogMixed: '/api/posthog/batch/',
};
const FORMATS = Object.keys(PATHS);
const SDK_FORMATS = FORMATS.filter((f) => f !== 'native');

function headersOf(format, key) {
  if (format === 'native') return { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  if (format.startsWith('segment')) {
    return {
      authorization: `Basic ${Buffer.from(`${key}:`).toString('base64')}`,
      'content-type': 'application/json',
    };
  }
  return { 'content-type': 'application/json' };
}

async function round(server, tenant, format, amount, seed) {
  const templates = Array.from({ length: 16 }, (_, i) => template(seed * 100 + i, format, tenant.ingestKey));
  const runId = `${format}-${seed}-${Date.now().toString(36)}`;
  const before = preciseCpuSecondsOf(server.pid);
  const result = await runLoad({
    url: `${server.baseUrl}${PATHS[format]}`,
    method: 'POST',
    headers: headersOf(format, tenant.ingestKey),
    body: (i) => templates[i % templates.length](`${runId}.${i.toString(36)}`),
    connections: CONNECTIONS,
    amount,
    count: true,
    maxSeconds: 120,
    sampleMs: 100,
  });
  const cpu = preciseCpuSecondsOf(server.pid) - before;
  const accepted = result.totals.accepted;
  check(
    `sdk-formats ${format} round ${seed}: every event accepted, no errors`,
    accepted === amount * BATCH && result.non2xx + result.errors + result.timeouts === 0,
    `accepted ${accepted} of ${amount * BATCH}, non-2xx ${result.non2xx}, errors ${result.errors}`,
  );
  return { eventsPerSec: result.eventsPerSec, cpuUsPerEvent: (cpu / Math.max(1, accepted)) * 1e6 };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const round2 = (x) => Math.round(x * 100) / 100;

/** Each format on a profiled server of its own; prints each profile's layers. */
async function profileMode({ dist, url, quick, log }) {
  const amount = quick ? 200 : 1200;
  const dir = path.join(CACHE, 'profiles', `sdk-${Date.now().toString(36)}`);
  const out = {};
  for (const f of FORMATS) {
    const server = await startServer({
      dist,
      databaseUrl: url,
      nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${dir}`],
    });
    try {
      const tenant = await makeTenant(dist, url, `bench-sdk-${f}`);
      await round(server, tenant, f, Math.round(amount / 2), 0);
      const r = await round(server, tenant, f, amount, 1);
      log(
        `sdk-formats profile ${f}: ${Math.round(r.eventsPerSec)} events/s, ${r.cpuUsPerEvent.toFixed(1)} µs CPU/event`,
      );
      out[f] = { ...r, pid: server.pid };
    } finally {
      await server.stop();
    }
    const file = fs.readdirSync(dir).find((name) => name.includes(`.${out[f].pid}.`));
    out[f].profile = file ? { file: path.join(dir, file), ...profileLayers(path.join(dir, file)) } : null;
  }
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
}

export async function sdkFormatsMode({ dist, cluster, quick, log, stopCluster, resultsDir }) {
  if (flags.profile) {
    const url = withDatabase(cluster.url, 'bench_sdk');
    await recreateDatabase(cluster.url, 'bench_sdk');
    try {
      await profileMode({ dist, url, quick, log });
    } finally {
      await stopCluster(cluster.dir).catch(() => undefined);
      if (cluster.temporary) fs.rmSync(cluster.dir, { recursive: true, force: true });
      fs.rmSync(dist, { recursive: true, force: true });
    }
    return correctness.every((c) => c.pass) ? 0 : 1;
  }
  const sizes = quick ? { rounds: 2, amount: 200, warm: 100 } : { rounds: 8, amount: 600, warm: 600 };
  const url = withDatabase(cluster.url, 'bench_sdk');
  await recreateDatabase(cluster.url, 'bench_sdk');
  const server = await startServer({ dist, databaseUrl: url });
  const formats = FORMATS;
  const runs = Object.fromEntries(FORMATS.map((f) => [f, []]));
  try {
    const tenant = await makeTenant(dist, url, 'bench-sdk');
    for (const f of formats) await round(server, tenant, f, sizes.warm, 0);
    for (let r = 1; r <= sizes.rounds; r++) {
      const order = formats.map((_, i) => formats[(i + r) % formats.length]);
      for (const f of order) {
        const out = await round(server, tenant, f, sizes.amount, r);
        runs[f].push(out);
        log(
          `sdk-formats round ${r} ${f}: ${Math.round(out.eventsPerSec)} events/s, ${out.cpuUsPerEvent.toFixed(1)} µs CPU/event`,
        );
      }
    }
  } finally {
    await server.stop();
    await stopCluster(cluster.dir).catch(() => undefined);
    if (cluster.temporary) fs.rmSync(cluster.dir, { recursive: true, force: true });
    fs.rmSync(dist, { recursive: true, force: true });
  }
  const summary = Object.fromEntries(
    formats.map((f) => [
      f,
      {
        eventsPerSec: Math.round(median(runs[f].map((x) => x.eventsPerSec))),
        serverCpuUsPerEvent: round2(median(runs[f].map((x) => x.cpuUsPerEvent))),
      },
    ]),
  );
  // Each round's ratio to the native run of the same round, then the median over the rounds: a
  // slow spell of the shared machine moves both sides of a round, and drops out of its ratio.
  const ratio = (f) => ({
    cpuPerEvent: round2(median(runs[f].map((x, i) => x.cpuUsPerEvent / runs.native[i].cpuUsPerEvent))),
    throughput: round2(median(runs[f].map((x, i) => x.eventsPerSec / runs.native[i].eventsPerSec))),
  });
  const section = {
    timestamp: new Date().toISOString(),
    batch: BATCH,
    connections: CONNECTIONS,
    rounds: sizes.rounds,
    requestsPerRound: sizes.amount,
    ...summary,
    vsNative: Object.fromEntries(SDK_FORMATS.map((f) => [f, ratio(f)])),
    targets: { cpuPerEventAtMost: 1.3, throughputAtLeast: 0.8 },
    correctness: correctness.every((c) => c.pass),
  };
  section.pass = ['segment', 'posthog'].every(
    (f) => section.vsNative[f].cpuPerEvent <= 1.3 && section.vsNative[f].throughput >= 0.8,
  );
  const file = path.join(resultsDir, quick ? 'quick.json' : 'latest.json');
  const results = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : { schema: 1 };
  results.sdkFormats = section;
  fs.writeFileSync(file, JSON.stringify(results, null, 2) + '\n');
  process.stdout.write(`${JSON.stringify(section, null, 2)}\n`);
  return correctness.every((c) => c.pass) ? 0 : 1;
}
