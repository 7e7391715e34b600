// Loaded by jest (setupFilesAfterEnv) in every e2e file: each request sent through Supertest is
// checked against docs/openapi.json, and the test fails when the document and the server
// disagree: a request the server accepts but the document forbids, or the reverse. For
// POST /api/ingest the comparison is per event: an event the server rejects in its 200 answer
// must break the event schema, and an event it keeps must conform.
import fs from 'node:fs';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { Test } from 'supertest';
import type { Response } from 'supertest';
import type { OpenAPIObject } from '@nestjs/swagger';
import { RequestContract } from './contract';

// Rejections no JSON schema can state: storage, size, age and content policies.
const BEYOND_SCHEMA_EVENT_CODES = new Set([
  'unstorable_value',
  'event_too_large',
  'event_too_old',
  'pii_detected',
  // State, not shape: the app's distinct event names of the day.
  'too_many_event_names',
  'user_suppressed',
  // The app's tracking plan, which the document cannot know.
  'schema_violation',
  'unplanned_event',
]);
// Request-level rejections beyond the schema: a forged or foreign cursor, a range that is
// empty or too long, parameters that exclude each other.
// A tracking plan whose JSON Schemas do not compile, or a malformed If-Match.
// A breakdown dimension the app did not declare.
const BEYOND_SCHEMA_REQUEST_CODES = new Set([
  'invalid_cursor',
  'invalid_plan',
  'invalid_header',
  'unknown_dimension',
]);

/**
 * Tests that send requests the document cannot judge, on purpose: hostile or random input,
 * bodies that are not what their Content-Type says, values that parse to something a schema
 * cannot tell apart (1e400 is Infinity), or rules that span several parameters or need a calendar
 * (no 30 February, from before to, at most 366 days, range or dates). Named by the full title of
 * the test (describe blocks and it), or by a describe block that holds only such tests.
 */
export const EXEMPT_TESTS: readonly string[] = [
  // Random and hostile requests by design.
  'fuzzing: no 5xx, problem+json with a stable code, and only accepted events stored ',
  'security review (OWASP API Security Top 10, 2023) API8 injection: SQL through every query parameter ',
  'security review (OWASP API Security Top 10, 2023) API8 security misconfiguration errors leak no stack trace, SQL or internals',
  'POST /api/ingest 400: envelope errors store nothing invalid_json for a body that is not UTF-8',
  'POST /api/ingest per-event errors: the event is rejected, the rest is stored invalid_value for a number too large to be finite',
  'hardening request headers and caching two Authorization headers get 400 invalid_header',
  // Calendar, range and span rules.
  'GET /api/v1/events query validation: 400 invalid_query ',
  // Instants, from before to, the export horizon (it moves with the clock), ids of the app.
  'GET /api/v1/export errors 400 ',
  'rollups query validation: 400 invalid_query ',
  // The same range rules, and window only with interval=day.
  'insights: erasure, zone changes and the value bound errors GET /api/v1/',
  'tracking plans GET /api/v1/plan/quality 400 for a bad range, 403 without plans:read',
  'hardening instants moved out of range by their offset ',
  'the deletions feed gives downstream copies the userKeys to delete refuses a bad since',
  'security review (OWASP API Security Top 10, 2023) API4 unrestricted resource consumption rollups: ',
];

function exempt(testName: string): boolean {
  return EXEMPT_TESTS.some((name) => testName === name || testName.startsWith(name));
}

const document = JSON.parse(
  fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'openapi.json'), 'utf8'),
) as OpenAPIObject;
const contract = new RequestContract(document);

type SentTest = Test & { _data?: unknown; _header?: Record<string, string>; _written?: Buffer[] };

const MAX_INFLATED = 4 * 1024 * 1024;

function sentBody(test: SentTest): { body: unknown; json: boolean } {
  let data: unknown = test._written ? Buffer.concat(test._written) : test._data;
  if (data === undefined) return { body: undefined, json: true };
  try {
    if (Buffer.isBuffer(data) || data instanceof Uint8Array) {
      const buf = Buffer.from(data);
      const encoding = String(test._header?.['content-encoding'] ?? '').toLowerCase();
      // Inflated with a cap: a body past it is over every ingest limit, so nothing to compare.
      data = (
        /^(x-)?gzip$/.test(encoding) ? gunzipSync(buf, { maxOutputLength: MAX_INFLATED }) : buf
      ).toString('utf8');
    }
    if (typeof data === 'string') return { body: JSON.parse(data), json: true };
    return { body: data, json: true };
  } catch {
    return { body: undefined, json: false };
  }
}

/** Null when the request conforms as far as the server's answer can tell, or the disagreement. */
export function disagreement(test: SentTest, res: Response): string | null {
  const req = (res as unknown as { req?: { method: string; path: string } }).req;
  if (!req) return null;
  const { body, json } = sentBody(test);
  const verdict = contract.verdict(req.method, req.path, body, json);
  if (!verdict) return null;
  const where = `${req.method} ${req.path.slice(0, 120)}`;
  const code = (res.body as { code?: string } | undefined)?.code;
  if (res.status >= 200 && res.status < 300) {
    if (!verdict.valid)
      return `${where}: the server answered ${res.status} to a request the document forbids: ${verdict.problems.join('; ')}`;
    const result = res.body as { rejected?: number; errors?: { index: number; code: string }[] };
    if (!verdict.events || !Array.isArray(result.errors)) return null;
    const rejected = new Map<number, string[]>();
    for (const e of result.errors) rejected.set(e.index, [...(rejected.get(e.index) ?? []), e.code]);
    // A capped error list cannot name every rejected event.
    if (rejected.size !== result.rejected) return null;
    for (const [i, problem] of verdict.events.entries()) {
      const codes = rejected.get(i);
      if (codes && problem === null && !codes.some((c) => BEYOND_SCHEMA_EVENT_CODES.has(c))) {
        return `${where}: events/${i} conforms to the document but the server rejected it (${codes.join(', ')})`;
      }
      if (!codes && problem !== null) {
        return `${where}: events/${i} breaks the document (${problem}) but the server kept it`;
      }
    }
    return null;
  }
  if (res.status === 400 && !BEYOND_SCHEMA_REQUEST_CODES.has(code ?? '')) {
    if (verdict.valid && !(verdict.events ?? []).some((e) => e !== null)) {
      return `${where}: the document allows the request but the server refused it (400 ${code})`;
    }
  }
  return null;
}

type Assert = (this: SentTest, err: unknown, res: Response, fn: unknown) => void;
const proto = Test.prototype as unknown as { assert: Assert };
const original = proto.assert;
// Bodies written in pieces (`req.write(buffer)`) are kept to be checked too.
const writeProto = Test.prototype as unknown as {
  write: (this: SentTest, data: unknown, enc?: unknown) => boolean;
};
const originalWrite = writeProto.write;
writeProto.write = function (this: SentTest, data: unknown, enc?: unknown) {
  (this._written ??= []).push(Buffer.isBuffer(data) ? data : Buffer.from(String(data)));
  return originalWrite.call(this, data, enc);
};
proto.assert = function (this: SentTest, err: unknown, res: Response, fn: unknown) {
  let problem: Error | null = null;
  if (res && !exempt(expect.getState().currentTestName ?? '')) {
    const found = disagreement(this, res);
    if (found) problem = new Error(`Request contract: ${found}`);
  }
  return original.call(this, problem ?? err, res, fn);
};
