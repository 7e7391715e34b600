// `--name-bound`: the ingest cost of the per-app bound of distinct event names per day
// (INGEST_MAX_EVENT_NAMES_PER_DAY), alone, with no server or database, written to the `nameBound`
// section of bench/results/latest.json (the other sections are left as they are).
//
// Two measurements on one core, both in CPU time (process.cpuUsage), which holds up better than
// wall time on a shared machine:
//  - `check`: the admission call alone (one Set lookup per event), over names already known;
//  - `validator`: the service's event validator on 100-event batches of realistic events, without
//    and with the bound, in alternating rounds; the cost of the bound is the median of the
//    per-round differences. A flood variant sends a new name with every event past the limit.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { EVENT_NAMES, makeEvent, rng } from '../lib/events.mjs';
import { ROOT, BENCH, log, QUICK } from '../lib/common.mjs';
import { requestRules } from '../lib/validation.mjs';

const BATCH = 100;
const TARGET_US = 0.2;

function cpuUs(fn) {
  const t0 = process.cpuUsage();
  fn();
  const d = process.cpuUsage(t0);
  return d.user + d.system;
}

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function load(dist) {
  const requireFrom = (file) => createRequire(file)(file);
  const { EventNameBound } = requireFrom(path.join(dist, 'src', 'ingest', 'event-name-bound.js'));
  const { EventValidator } = requireFrom(path.join(dist, 'src', 'ingest', 'event-validator.js'));
  return { EventNameBound, EventValidator };
}

function newBound(EventNameBound, limit) {
  // No stored names: the loader answers at once with none, as for a new day.
  return new EventNameBound({ limit, maxAgeDays: 7, refreshMs: 60_000 }, async () => []);
}

/** ns per admission of an already known name (the app's usual names, freshly parsed strings). */
function benchCheck(EventNameBound, now, calls) {
  const bound = newBound(EventNameBound, 2000);
  const warm = bound.forApp('app', now);
  for (const n of EVENT_NAMES) warm.admit(n, now);
  const text = JSON.stringify(Array.from({ length: calls }, (_, i) => EVENT_NAMES[i % EVENT_NAMES.length]));
  const rounds = [];
  for (let round = 0; round < 15; round++) {
    const names = JSON.parse(text);
    const admission = bound.forApp('app', now);
    let kept = 0;
    const us = cpuUs(() => {
      for (let i = 0; i < calls; i++) if (admission.admit(names[i], now)) kept++;
    });
    if (kept !== calls) throw new Error('a known name was refused');
    rounds.push((us * 1000) / calls);
  }
  return { calls, nsPerEvent: median(rounds), roundsNs: rounds.map((v) => Math.round(v * 10) / 10) };
}

/**
 * ns per refusal of a new 150-character name once the day is full. The names are fresh strings,
 * as a parsed request body makes them, so the cost of hashing each one is included.
 */
function benchCheckNewNames(EventNameBound, now, calls) {
  const limit = 2000;
  const bound = newBound(EventNameBound, limit);
  const fill = bound.forApp('app', now);
  for (let i = 0; i < limit; i++) fill.admit(`known.${i}`.padEnd(150, 'k'), now);
  const rounds = [];
  for (let round = 0; round < 15; round++) {
    // Flat strings, as JSON.parse makes them (a template or padEnd result is a rope).
    const names = JSON.parse(
      JSON.stringify(Array.from({ length: calls }, (_, i) => `new.${round}.${i}.`.padEnd(150, 'x'))),
    );
    const admission = bound.forApp('app', now);
    let refused = 0;
    const us = cpuUs(() => {
      for (let i = 0; i < calls; i++) if (!admission.admit(names[i], now)) refused++;
    });
    if (refused !== calls) throw new Error('a new name past the limit was admitted');
    rounds.push((us * 1000) / calls);
  }
  return { calls, nsPerEvent: median(rounds), roundsNs: rounds.map((v) => Math.round(v * 10) / 10) };
}

/** Validator CPU per event without and with the bound, alternating, on the same batches. */
function benchValidator(classes, now, { batches, rounds, flood }) {
  const { EventNameBound, EventValidator } = classes;
  const r = rng(7);
  const data = [];
  for (let b = 0; b < batches; b++) {
    const events = [];
    for (let i = 0; i < BATCH; i++) {
      const e = makeEvent(r, `e${b}-${i}`, now);
      if (flood) e.eventName = `flood.${b}.${i}`.padEnd(150, 'x');
      events.push(e);
    }
    data.push(events);
  }
  // Each pass validates freshly parsed batches, as a request does: V8 hashes a string the first
  // time a Set looks it up, so reused strings would hide the cost of hashing every event's name.
  const text = JSON.stringify(data);
  const bound = newBound(EventNameBound, 2000);
  const rules = (withBound) => ({
    ...requestRules(now),
    maxIssuesListed: 100,
    eventNames: withBound ? bound.forApp('app', now) : undefined,
  });
  const pass = (withBound) => {
    const batchesOfPass = JSON.parse(text);
    return cpuUs(() => {
      for (const events of batchesOfPass) {
        const v = new EventValidator(rules(withBound));
        for (let i = 0; i < events.length; i++) v.validate(events[i], i);
      }
    });
  };
  for (let w = 0; w < 3; w++) {
    pass(false);
    pass(true);
  }
  const events = batches * BATCH;
  const without = [];
  const withIt = [];
  const diffs = [];
  for (let round = 0; round < rounds; round++) {
    // Alternate which goes first, so that drift on the machine falls on both alike.
    const [a, b] = round % 2 ? [pass(true), pass(false)] : [pass(false), pass(true)];
    const [off, on] = round % 2 ? [b, a] : [a, b];
    without.push((off * 1000) / events);
    withIt.push((on * 1000) / events);
    diffs.push(((on - off) * 1000) / events);
  }
  const round1 = (v) => Math.round(v * 10) / 10;
  return {
    events,
    rounds,
    nsPerEventWithout: round1(median(without)),
    nsPerEventWith: round1(median(withIt)),
    nsPerEventBound: round1(median(diffs)),
    diffsNs: diffs.map(round1),
  };
}

export async function nameBoundMode() {
  const dist = path.join(ROOT, 'dist');
  if (!fs.existsSync(path.join(dist, 'src', 'ingest', 'event-name-bound.js'))) {
    throw new Error('dist/src/ingest/event-name-bound.js is missing: run npm run build first');
  }
  const classes = load(dist);
  const now = Date.now();
  const check = benchCheck(classes.EventNameBound, now, QUICK ? 20_000 : 200_000);
  log(`name bound: the check alone ${check.nsPerEvent.toFixed(1)} ns per event (CPU)`);
  const refusal = benchCheckNewNames(classes.EventNameBound, now, QUICK ? 5_000 : 20_000);
  log(`name bound: refusing a new 150-character name ${refusal.nsPerEvent.toFixed(1)} ns per event (CPU)`);
  const size = QUICK ? { batches: 50, rounds: 5 } : { batches: 200, rounds: 21 };
  const realistic = benchValidator(classes, now, { ...size, flood: false });
  log(
    `name bound: validator ${realistic.nsPerEventWithout} -> ${realistic.nsPerEventWith} ns per event, ` +
      `bound ${realistic.nsPerEventBound} ns (median of ${realistic.rounds} paired rounds)`,
  );
  const flood = benchValidator(classes, now, { ...size, flood: true });
  log(`name bound: flood of new names, bound ${flood.nsPerEventBound} ns per event`);
  const section = {
    timestamp: new Date().toISOString(),
    method:
      'CPU time (process.cpuUsage) on one core, no server: the admission check alone over known names, and ' +
      'the event validator on 100-event batches without and with the bound in alternating paired rounds ' +
      '(median of per-round differences). The machine is shared (2 cores, other work running): indicative.',
    targetUsPerEvent: TARGET_US,
    checkAlone: check,
    checkRefusingNewNames: refusal,
    validatorRealistic: realistic,
    // Includes what any rejected event costs (its entry in `errors`, listed for the first 100 per
    // batch): the bound's own share is checkRefusingNewNames.
    validatorNewNameFlood: flood,
    meanNameChars: Math.round(EVENT_NAMES.reduce((n, s) => n + s.length, 0) / EVENT_NAMES.length),
    // The usual case: an app's own names, the bound inside the validator.
    usPerEvent: Math.round(Math.max(check.nsPerEvent, realistic.nsPerEventBound)) / 1000,
    // A flood of new 150-character names past the limit: V8 hashes each name (about 2 ns a
    // character) before the Set can say it is new.
    worstCaseUsPerEvent: Math.round(refusal.nsPerEvent) / 1000,
  };
  section.pass = section.usPerEvent <= TARGET_US;
  const file = path.join(BENCH, 'results', QUICK ? 'quick.json' : 'latest.json');
  const results = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {};
  results.nameBound = section;
  fs.writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
  log(
    `name bound: ${section.usPerEvent} µs per event (target ${TARGET_US}), written to ${path.relative(ROOT, file)}`,
  );
  return section.pass ? 0 : 1;
}
