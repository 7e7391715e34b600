// The validation micro-benchmark: the service's own event validator, called directly on one
// core, on a mix with 10% invalid events, one validator instance per 100-event batch as in a
// request.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { INVALID_KINDS, makeEvent, makeInvalidEvent } from './events.mjs';

const DAY_MS = 86_400_000;
const BATCH = 100;

/** The rules of one request's validator: the default limits and PII policy. */
export function requestRules(now) {
  return {
    receivedAt: now,
    skewMs: 0,
    oldestTs: now - 7 * DAY_MS,
    maxEventBytes: 32_768,
    piiPolicy: 'redact',
    forceTestMode: false,
    pseudonymise: (kind, value) => `hmac:${kind}:${value.length}`,
  };
}

/** The hot-path event validator from the build; null when the build has none. */
export async function loadValidator(dist) {
  const file = path.join(dist, 'src', 'ingest', 'event-validator.js');
  if (!fs.existsSync(file)) return null;
  const { EventValidator } = createRequire(file)(file);
  if (typeof EventValidator !== 'function') return null;
  return {
    name: 'EventValidator (src/ingest/event-validator.ts)',
    /** A validator for one request, with the default limits and PII policy. */
    forBatch(now) {
      const validator = new EventValidator(requestRules(now));
      return (event, index) => validator.validate(event, index) !== null;
    },
  };
}

/**
 * The documented schema as Nest's ValidationPipe would run it (transform, then validate) on each
 * 100-event batch: the baseline that the hand-written validator replaced on the hot path.
 * Null when the build has no DTOs.
 */
export function loadDtoValidator(dist) {
  const file = path.join(dist, 'src', 'ingest', 'ingest.dto.js');
  if (!fs.existsSync(file)) return null;
  const require = createRequire(file);
  require('reflect-metadata');
  const { IngestBatchDto } = require(file);
  const { plainToInstance } = require('class-transformer');
  const { validateSync } = require('class-validator');
  if (typeof IngestBatchDto !== 'function') return null;
  return {
    name: 'class-validator IngestBatchDto (plainToInstance + validateSync)',
    validateBatch(events) {
      return validateSync(plainToInstance(IngestBatchDto, { events }), { whitelist: true }).length === 0;
    },
  };
}

/** Batches of the same mix through the DTO path; events/s on this one core. */
export function benchDtoValidator(dto, total, r) {
  const now = Date.now();
  const batches = [];
  for (let b = 0; b < 100; b++) {
    const events = [];
    for (let i = 0; i < BATCH; i++) {
      const n = b * BATCH + i;
      events.push(
        n % 10 === 9 ? makeInvalidEvent(r, `d${n}`, Math.floor(n / 10), now) : makeEvent(r, `d${n}`, now),
      );
    }
    batches.push(events);
  }
  for (let b = 0; b < 10; b++) dto.validateBatch(batches[b]);
  const rounds = Math.max(1, Math.round(total / BATCH));
  const t0 = process.hrtime.bigint();
  for (let b = 0; b < rounds; b++) dto.validateBatch(batches[b % batches.length]);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  return { validator: dto.name, events: rounds * BATCH, seconds, eventsPerSec: (rounds * BATCH) / seconds };
}

/**
 * Validates `total` events (a pool of 10,000 reused) and reports events/s on this one core.
 * `mismatches` counts events the validator judged differently from how they were built.
 */
export function benchValidator(validator, total, r) {
  const now = Date.now();
  const pool = [];
  for (let i = 0; i < 10_000; i++) {
    const invalid = i % 10 === 9;
    const event = invalid
      ? makeInvalidEvent(r, `v${i}`, Math.floor(i / 10), now)
      : makeEvent(r, `v${i}`, now);
    pool.push({ event, invalid });
  }
  let mismatches = 0;
  let check;
  for (let i = 0; i < pool.length; i++) {
    if (i % BATCH === 0) check = validator.forBatch(now);
    if (check(pool[i].event, i % BATCH) === pool[i].invalid) mismatches++;
  }
  let rejected = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < total; i++) {
    if (i % BATCH === 0) check = validator.forBatch(now);
    if (!check(pool[i % pool.length].event, i % BATCH)) rejected++;
  }
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
