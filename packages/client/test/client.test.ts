import fc from 'fast-check';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BatchResult, parseRetryAfter, TallyClient, TallyError } from '../src/index.js';
import { encodeRecord } from '../src/spool.js';
import { FakeTally, Reply } from './fake-tally.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** A client on a fake clock: sleeps advance the clock at once. */
function setup(script: Reply[], options: Partial<ConstructorParameters<typeof TallyClient>[0]> = {}) {
  let clock = 1_700_000_000_000;
  const now = () => clock;
  const server = new FakeTally(script, now);
  const results: BatchResult[] = [];
  const errors: TallyError[] = [];
  const sleeps: number[] = [];
  const client = new TallyClient({
    endpoint: 'http://tally.test/',
    ingestKey: 'tly_live_x',
    fetch: server.fetch as typeof fetch,
    now,
    sleep: async (ms) => {
      sleeps.push(ms);
      clock += ms;
    },
    random: () => 0.5,
    gzipAboveBytes: Infinity,
    onResult: (r) => results.push(r),
    onError: (e) => errors.push(e),
    ...options,
  });
  return { client, server, results, errors, sleeps, advance: (ms: number) => (clock += ms) };
}

/** A fetch whose requests never get an answer. */
const unanswered = () => new Promise<Response>(() => {});

/**
 * A client on the real clock whose every request is answered by `answer`; it records the errors
 * and results it reports and counts the requests.
 */
function clientOn(
  answer: () => Promise<Response>,
  options: Partial<ConstructorParameters<typeof TallyClient>[0]> = {},
) {
  const counted = { calls: 0 };
  const errors: TallyError[] = [];
  const results: BatchResult[] = [];
  const client = new TallyClient({
    endpoint: 'http://tally.test',
    ingestKey: 'k',
    fetch: (() => {
      counted.calls++;
      return answer();
    }) as typeof fetch,
    onError: (e) => errors.push(e),
    onResult: (r) => results.push(r),
    ...options,
  });
  return { client, errors, results, counted };
}

describe('TallyClient tracking and retries', () => {
  it('fills a UUIDv7 eventId and the eventTime, keeps the caller’s, and answers flush()', async () => {
    const { client, server, results } = setup([]);
    const id = client.track({ eventName: 'A.b', payload: { plan: 'pro' } });
    expect(id).toMatch(UUID_V7);
    expect(client.track({ eventName: 'A.b', eventId: 'mine' })).toBe('mine');
    await client.flush();
    expect(server.stored.has(id)).toBe(true);
    expect(server.stored.has('mine')).toBe(true);
    expect(results).toHaveLength(1);
    expect(results[0].result).toMatchObject({ accepted: 2, rejected: 0 });
    expect(client.stats()).toMatchObject({ queued: 0, inFlight: 0, accepted: 2, batches: 1, retries: 0 });
  });

  it('makes time-ordered eventIds', () => {
    const { client } = setup([]);
    const a = client.track({ eventName: 'A.b' });
    const b = client.track({ eventName: 'A.b', eventTime: 5 });
    expect(a.slice(0, 13) <= b.slice(0, 13)).toBe(true);
    expect(b).not.toBe(a);
  });

  it('sends full batches once the tracking turn ends, with each event as it was at track()', async () => {
    const { client, server } = setup([], { flushAt: 2 });
    const payload = { step: 1 };
    const event = { eventName: 'A.b', payload };
    const ids = [client.track(event)];
    payload.step = 2;
    event.eventName = 'A.c';
    ids.push(client.track(event), client.track({ eventName: 'A.d' }));
    // A synchronous loop of track() calls only queues; the batches leave at the end of the turn.
    expect(server.requests).toBe(0);
    expect(client.stats()).toMatchObject({ queued: 3, inFlight: 0 });
    await Promise.resolve();
    expect(server.requests).toBe(1);
    await client.flush();
    expect(server.requests).toBe(2);
    expect(ids.map((id) => server.received.get(id))).toEqual([
      { eventName: 'A.b', step: 1 },
      { eventName: 'A.c', step: 2 },
      { eventName: 'A.d', step: undefined },
    ]);
  });

  it('honours Retry-After in seconds and as an HTTP date, and sets sentAt per attempt', async () => {
    const { client, server, sleeps } = setup(['429', '429-date', '503']);
    client.track({ eventName: 'A.b' });
    await client.flush();
    expect(sleeps).toEqual([2000, 3000, 1000]);
    expect(server.requests).toBe(4);
    expect(new Set(server.sentAts).size).toBe(4);
    expect(client.stats()).toMatchObject({ accepted: 1, retries: 3, batches: 4 });
  });

  it('backs off with full jitter on 500 and network errors, and counts a lost answer as a duplicate', async () => {
    const { client, server, sleeps } = setup(['500', 'reset', 'lost']);
    client.track({ eventName: 'A.b' });
    await client.flush();
    // random() = 0.5: half of 250, 500 and 1000 ms.
    expect(sleeps).toEqual([125, 250, 500]);
    expect(server.requests).toBe(4);
    expect(client.stats()).toMatchObject({ accepted: 0, duplicates: 1, rejected: 0 });
  });
});

describe('TallyClient final answers, 413 and limits', () => {
  it('never retries a 400, 401, 403 or 415 and reports the batch', async () => {
    for (const status of [400, 401, 403, 415]) {
      const { client, errors, results, counted } = clientOn(async () => {
        const body = { code: 'c' + status, detail: 'd', requestId: 'rq', errors: [] };
        return new Response(JSON.stringify(body), { status, headers: { 'x-request-id': 'rq' } });
      });
      client.track({ eventName: 'A.b' });
      client.track({ eventName: 'A.b' });
      await client.flush();
      expect(counted.calls).toBe(1);
      expect(errors.map((e) => [e.status, e.code, e.requestId])).toEqual([[status, 'c' + status, 'rq']]);
      expect(results[0]).toMatchObject({ status, eventIds: expect.any(Array) });
      expect(results[0].eventIds).toHaveLength(2);
      expect(client.stats().rejected).toBe(2);
    }
  });

  it('splits a batch on 413 with the limits it was told', async () => {
    const { client, server, results } = setup(['413']);
    for (let i = 0; i < 10; i++) client.track({ eventName: 'A.b' });
    await client.flush();
    expect(server.requests).toBe(3);
    expect(results.map((r) => r.eventIds.length)).toEqual([5, 5]);
    expect(client.stats()).toMatchObject({ accepted: 10, rejected: 0 });
  });

  it('rejects a single event over the byte limit on the client, without sending it again', async () => {
    const { client, errors, counted } = clientOn(async () => {
      const body = { code: 'payload_too_large', detail: 'big', limitEvents: 1000, limitBytes: 1024 };
      return new Response(JSON.stringify(body), { status: 413 });
    });
    client.track({ eventName: 'A.b', payload: { text: 'x'.repeat(1000), more: 'y'.repeat(500) } });
    await client.flush();
    client.track({ eventName: 'A.b', payload: { text: 'x'.repeat(1000), more: 'y'.repeat(500) } });
    await client.flush();
    expect(counted.calls).toBe(1);
    expect(errors.map((e) => e.code)).toEqual(['event_too_large', 'event_too_large']);
    expect(client.stats()).toMatchObject({ rejected: 2, queued: 0, inFlight: 0 });
  });

  it('drops the oldest events of a full queue, counted and reported', async () => {
    const { client, server, errors } = setup([], {
      maxQueueEvents: 3,
      flushAt: 100,
      flushIntervalMs: 60_000,
    });
    const ids = [1, 2, 3, 4, 5].map(() => client.track({ eventName: 'A.b' }));
    expect(client.stats()).toMatchObject({ queued: 3, dropped: 2 });
    expect(errors.map((e) => e.code)).toEqual(['queue_full', 'queue_full']);
    await client.flush();
    expect([...server.stored.keys()]).toEqual(ids.slice(2));
  });
});

describe('TallyClient give-ups, shutdown and properties', () => {
  it('gives up after maxAttempts and after maxRetryElapsedMs', async () => {
    const a = setup(['500', '500', '500', '500'], { maxAttempts: 3 });
    a.client.track({ eventName: 'A.b' });
    await a.client.flush();
    expect(a.server.requests).toBe(3);
    expect(a.errors.map((e) => e.code)).toEqual(['retries_exhausted']);

    const b = setup(['429', '429', '429'], { maxRetryElapsedMs: 3000 });
    b.client.track({ eventName: 'A.b' });
    await b.client.flush();
    expect(b.server.requests).toBe(2);
    expect(b.client.stats().rejected).toBe(1);
  });

  it('throws on track() after shutdown() and reports what could not be sent', async () => {
    const { client, errors } = clientOn(unanswered, { requestTimeoutMs: 60_000 });
    client.track({ eventName: 'A.b' });
    const report = await client.shutdown({ timeoutMs: 20 });
    expect(report).toEqual({ flushed: false, unsent: 1 });
    expect(errors.map((e) => e.code)).toEqual(['shutdown_timeout']);
    expect(() => client.track({ eventName: 'A.b' })).toThrow(
      expect.objectContaining({ code: 'client_closed' }),
    );
  });

  it('parses Retry-After as seconds or an HTTP date', () => {
    expect(parseRetryAfter('3', 0)).toBe(3000);
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 4_000)).toBe(6000);
    expect(parseRetryAfter('soon', 0)).toBeNull();
    expect(parseRetryAfter(null, 0)).toBeNull();
  });

  it('property: every event ends exactly once and no event is sent more than maxAttempts times', async () => {
    const reply = fc.constantFrom<Reply>('ok', '429', '429-date', '503', '500', '413', 'reset', 'lost');
    await fc.assert(
      fc.asyncProperty(
        fc.array(reply, { maxLength: 40 }),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 60 }),
        fc.integer({ min: 1, max: 25 }),
        fc.integer({ min: 1, max: 4 }),
        async (script, valid, flushAt, concurrency) => {
          const maxAttempts = 4;
          const { client, server, results } = setup(script, { flushAt, concurrency, maxAttempts });
          const ids = valid.map((ok) => client.track({ eventName: ok ? 'A.b' : 'bad' }));
          await client.flush();

          const outcome = new Map<string, number>();
          for (const r of results) for (const id of r.eventIds) outcome.set(id, (outcome.get(id) ?? 0) + 1);
          expect(ids.every((id) => outcome.get(id) === 1)).toBe(true);
          expect(outcome.size).toBe(ids.length);
          const s = client.stats();
          expect(s.accepted + s.duplicates + s.rejected).toBe(ids.length);
          expect(s.queued + s.inFlight + s.dropped).toBe(0);
          for (const n of server.sends.values()) expect(n).toBeLessThanOrEqual(maxAttempts);
          // Whatever was answered with a 200 is stored exactly once (the fake counts copies).
          for (const r of results) {
            if (!r.result) continue;
            const rejected = new Set(r.result.errors.map((e) => e.index));
            r.eventIds.forEach((id, i) => {
              if (!rejected.has(i)) expect(server.stored.get(id)).toBe(1);
            });
          }
          await client.shutdown({ timeoutMs: 1000 });
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe('TallyClient counters and slots', () => {
  it('counts the server’s rejections apart from the client’s give-ups', async () => {
    const { client } = setup(['400', '500', '500'], { maxAttempts: 2, flushAt: 2 });
    // First batch: a 400 (the server's word). Second: two 500s, then out of attempts.
    client.track({ eventName: 'A.b' });
    client.track({ eventName: 'A.b' });
    await client.flush();
    client.track({ eventName: 'A.b' });
    await client.flush();
    // Third: a 200 with one per-event rejection.
    client.track({ eventName: 'bad' });
    client.track({ eventName: 'A.b' });
    await client.flush();
    expect(client.stats()).toMatchObject({ rejectedByServer: 3, gaveUp: 1, rejected: 4, accepted: 1 });
  });

  it('lets other batches through while one waits out its backoff', async () => {
    const order: string[] = [];
    let calls = 0;
    let releaseBackoff!: () => void;
    const client = new TallyClient({
      endpoint: 'http://tally.test',
      ingestKey: 'k',
      flushAt: 1,
      concurrency: 1,
      gzipAboveBytes: Infinity,
      onError: () => undefined,
      // The backoff ends when the test says so, not after a time.
      sleep: () => new Promise<void>((r) => (releaseBackoff = r)),
      fetch: (async (_url: string, init: RequestInit) => {
        const name = (JSON.parse(String(init.body)) as { events: { eventName: string }[] }).events[0]
          .eventName;
        order.push(name);
        if (++calls === 1) return new Response('{}', { status: 500 });
        const ok = {
          received: 1,
          accepted: 1,
          duplicates: 0,
          rejected: 0,
          metered: 1,
          errors: [],
          warnings: [],
        };
        return new Response(JSON.stringify(ok), { status: 200 });
      }) as typeof fetch,
    });
    client.track({ eventName: 'First.a' });
    client.track({ eventName: 'Second.a' });
    client.track({ eventName: 'Third.a' });
    const flushed = client.flush();
    while (order.length < 3) await new Promise((r) => setImmediate(r));
    // With its one slot given up, the other two batches went while the first waited.
    expect(order).toEqual(['First.a', 'Second.a', 'Third.a']);
    releaseBackoff();
    await flushed;
    expect(order).toEqual(['First.a', 'Second.a', 'Third.a', 'First.a']);
    expect(client.stats()).toMatchObject({ accepted: 3, retries: 1 });
  });
});

describe('TallyClient spool', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'tally-spool-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps unanswered durable events on disk and sends them from a new client', async () => {
    const { client: first } = clientOn(unanswered, { spoolDir: dir });
    const ids = await Promise.all([1, 2, 3].map(() => first.trackDurable({ eventName: 'A.b' })));
    expect(readdirSync(dir)).toHaveLength(1);
    await first.shutdown({ timeoutMs: 10 });

    const { client, server } = setup([], { spoolDir: dir, spoolSegmentEvents: 2 });
    await client.trackDurable({ eventName: 'A.b' });
    await client.flush();
    await client.shutdown({ timeoutMs: 1000 });
    for (const id of ids) expect(server.stored.get(id)).toBe(1);
    expect(server.stored.size).toBe(4);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('recovers the records before a torn last record', async () => {
    const good = JSON.stringify({ eventId: 'e-1', eventName: 'A.b', eventTime: 1 });
    const torn = encodeRecord(JSON.stringify({ eventId: 'e-2', eventName: 'A.b', eventTime: 1 })).slice(
      0,
      20,
    );
    writeFileSync(join(dir, 'seg-0000000000000000.ndjson'), encodeRecord(good) + torn);
    const corrupt = encodeRecord(JSON.stringify({ eventId: 'e-3', eventName: 'A.b' })).replace('e-3', 'e-4');
    writeFileSync(join(dir, 'seg-0000000000000001.ndjson'), corrupt);
    const { client, server } = setup([], { spoolDir: dir });
    await client.trackDurable({ eventName: 'A.b', eventId: 'e-5' });
    await client.flush();
    await client.shutdown();
    expect([...server.stored.keys()].sort()).toEqual(['e-1', 'e-5']);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('rejects trackDurable() when spoolDir cannot be made, reports it once, and never crashes', async () => {
    const file = join(dir, 'not-a-dir');
    writeFileSync(file, '');
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const { client, errors } = setup([], { spoolDir: join(file, 'spool') });
      await expect(client.trackDurable({ eventName: 'A.b' })).rejects.toThrow(/ENOTDIR/);
      // track() and flush() still work without the spool.
      client.track({ eventName: 'A.b' });
      await client.flush();
      expect(client.stats()).toMatchObject({ accepted: 1 });
      await client.shutdown();
      await new Promise((r) => setImmediate(r));
      expect(errors.map((e) => e.code)).toEqual(['spool_error']);
      expect(unhandled).toEqual([]);
    } finally {
      process.removeListener('unhandledRejection', onUnhandled);
    }
  });

  it('writes one checksummed line per event', async () => {
    const { client } = clientOn(unanswered, { spoolDir: dir });
    const id = await client.trackDurable({ eventName: 'A.b' });
    const [file] = readdirSync(dir);
    expect(file).toMatch(/^seg-[0-9a-f]{16}\.ndjson$/);
    const line = readFileSync(join(dir, file), 'utf8');
    expect(line).toMatch(/^[0-9a-f]{8} \{.*\}\n$/);
    expect(JSON.parse(line.slice(9))).toMatchObject({ eventId: id, eventName: 'A.b' });
    await client.shutdown({ timeoutMs: 10 });
  });
});

describe('per-event rejections are visible by default', () => {
  it('reports them through the default onError, once per code with its count and first reason', async () => {
    const logged: string[] = [];
    const spy = jest.spyOn(console, 'error').mockImplementation((line: string) => void logged.push(line));
    try {
      const answer = {
        received: 3,
        accepted: 0,
        duplicates: 0,
        rejected: 3,
        metered: 0,
        testMode: false,
        payloadBytes: 10,
        serverTime: 1,
        errors: [
          { index: 0, field: 'payload.a', code: 'nested_value', message: 'payload.a is nested.' },
          { index: 1, field: 'payload.b', code: 'nested_value', message: 'payload.b is nested.' },
          {
            index: 2,
            field: 'eventTime',
            code: 'event_too_old',
            message: 'The event is older than 30 days.',
          },
        ],
        warnings: [],
        errorCounts: { nested_value: 2, event_too_old: 1 },
        warningCounts: {},
      };
      const client = new TallyClient({
        endpoint: 'http://tally.test',
        ingestKey: 'k',
        fetch: (async () =>
          new Response(JSON.stringify(answer), {
            status: 200,
            headers: { 'content-type': 'application/json' },
          })) as typeof fetch,
      });
      for (let i = 0; i < 3; i++) client.track({ eventName: 'A' });
      await client.flush();
      await client.shutdown();
      expect(logged).toEqual([
        '[tally] nested_value: 2 events rejected by the server (payload.a: payload.a is nested.); they are not resent.',
        '[tally] event_too_old: 1 event rejected by the server (eventTime: The event is older than 30 days.); they are not resent.',
      ]);
      expect(client.stats()).toMatchObject({ rejectedByServer: 3 });
    } finally {
      spy.mockRestore();
    }
  });
});
