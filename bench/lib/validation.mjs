// The validation micro-benchmark: the service's own event validator, called directly on one
// core, on a mix with 10% invalid events.
import fs from 'node:fs';
import path from 'node:path';
import { INVALID_KINDS, makeEvent, makeInvalidEvent } from './events.mjs';

/** Finds the hot-path event validator in the build; null when ingest has none yet. */
export async function loadValidator(dist) {
  const dir = path.join(dist, 'src', 'ingest');
  if (!fs.existsSync(dir)) return null;
  return null;
}

/**
 * Validates `total` events (a pool of 10,000 reused) and reports events/s on this one core.
 * `mismatches` counts events the validator judged differently from how they were built.
 */
export function benchValidator(validator, total, r) {
  const pool = [];
  const now = Date.now();
  for (let i = 0; i < 10_000; i++) {
    const invalid = i % 10 === 9;
    const event = invalid ? makeInvalidEvent(r, `v${i}`, i, now) : makeEvent(r, `v${i}`, now);
    pool.push({ event, invalid });
  }
  let mismatches = 0;
  for (const { event, invalid } of pool) if (validator.isValid(event) === invalid) mismatches++;
  let rejected = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < total; i++) if (!validator.isValid(pool[i % pool.length].event)) rejected++;
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  return {
    validator: validator.name,
    events: total,
    invalidShare: 0.1,
    invalidKinds: INVALID_KINDS,
    rejected,
    seconds,
    eventsPerSec: total / seconds,
    mismatches,
  };
}
