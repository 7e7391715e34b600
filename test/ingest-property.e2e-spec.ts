import fc from 'fast-check';
import request from 'supertest';
import { gzipSync } from 'node:zlib';
import { bearer, makeTenant } from './factories';
import { storedEventCount } from './factories/events';
import { useTestApp } from './support/test-app';
import { DAY_MS as DAY } from '@app/common/time';

// Random batches mixing valid and invalid events. Every event carries its position in
// `deviceModel` (always valid), so the test can tell exactly which events were stored.

const now = Date.now();

const goodText = fc.string({ minLength: 1, maxLength: 12 });
const odd = fc.constantFrom<unknown>(
  '',
  'a\u0000b',
  '\ud800',
  'x'.repeat(201),
  42,
  true,
  null,
  [],
  { nested: 1 },
  'ann@example.com',
  '+1 415 555 0123',
);
const field = <T>(usual: fc.Arbitrary<T>) =>
  fc.oneof({ weight: 8, arbitrary: usual }, { weight: 1, arbitrary: odd });

const payloadValue = fc.oneof(
  { weight: 8, arbitrary: fc.oneof(fc.string({ maxLength: 16 }), fc.integer(), fc.boolean()) },
  {
    weight: 1,
    arbitrary: fc.constantFrom<unknown>(
      null,
      { deep: 1 },
      [1],
      'x'.repeat(1025),
      'card 4111 1111 1111 1111',
      '\u0000',
    ),
  },
);

const eventArb = fc.record(
  {
    eventName: field(goodText),
    eventId: field(fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f')),
    anonymousUserId: field(goodText),
    sessionId: field(goodText),
    eventTime: field(
      fc.oneof(
        fc.integer({ min: now - 6 * DAY, max: now }),
        fc.constantFrom(now - 31 * DAY, now + DAY, -1, 1.5),
      ),
    ),
    isTestMode: field(fc.boolean()),
    floatValue: field(fc.double({ noNaN: true, noDefaultInfinity: true })),
    buildNumber: field(goodText),
    locale: field(fc.constantFrom('en-US', 'fr_FR', 'nope nope')),
    timezone: field(fc.constantFrom('Europe/Paris', '+02:00', 'Mars/Base')),
    payload: field(fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), payloadValue, { maxKeys: 5 })),
    privacyMode: fc.constantFrom('unlinked', 'other'),
    extra: fc.string(),
  },
  { requiredKeys: ['eventName'] },
);

const batchArb = fc.record({
  events: fc.array(fc.oneof({ weight: 12, arbitrary: eventArb }, { weight: 1, arbitrary: odd }), {
    minLength: 1,
    maxLength: 40,
  }),
  gzip: fc.boolean(),
  sentAt: fc.option(fc.constantFrom(now, now - 3_600_000, now + 3_600_000), { nil: undefined }),
  testKey: fc.boolean(),
  resend: fc.boolean(),
});

interface Result {
  received: number;
  accepted: number;
  duplicates: number;
  rejected: number;
  metered: number;
  testMode: boolean;
  errors: { index: number }[];
}

describe('POST /api/ingest: properties over random batches', () => {
  const t = useTestApp({ INGEST_RATE_REQUESTS: '100000', INGEST_RATE_EVENTS: '1000000' });

  async function send(key: string, body: string, gzip: boolean): Promise<request.Response> {
    const req = request(t.http).post('/api/ingest').set(bearer(key)).set('Content-Type', 'application/json');
    if (gzip) req.set('Content-Encoding', 'gzip');
    req.write(gzip ? gzipSync(body) : body);
    return req;
  }

  it('never 5xx; received = accepted + duplicates + rejected; the database holds exactly the accepted events', async () => {
    await fc.assert(
      fc.asyncProperty(batchArb, async (batch) => {
        const tenant = await makeTenant(t.app);
        const events = batch.events.map((e, i) =>
          typeof e === 'object' && e !== null && !Array.isArray(e) ? { ...e, deviceModel: `#${i}` } : e,
        );
        const body = JSON.stringify({
          events,
          ...(batch.sentAt === undefined ? {} : { sentAt: batch.sentAt }),
        });
        const key = batch.testKey ? tenant.testKey : tenant.liveKey;

        const res = await send(key, body, batch.gzip);
        expect(res.status).toBe(200);
        const r = res.body as Result;
        expect(r.received).toBe(events.length);
        expect(r.accepted + r.duplicates + r.rejected).toBe(r.received);
        expect(r.testMode).toBe(batch.testKey);

        // What must be stored: the events without an error, the first of each eventId.
        const rejected = new Set(r.errors.map((e) => e.index));
        expect(rejected.size).toBe(r.rejected);
        const seen = new Set<string>();
        const expected: string[] = [];
        events.forEach((e, i) => {
          if (rejected.has(i)) return;
          const id = (e as { eventId?: unknown }).eventId;
          if (typeof id === 'string') {
            if (seen.has(id)) return;
            seen.add(id);
          }
          expected.push(`#${i}`);
        });
        const rows = (await t.db.query(
          `SELECT device_model, is_test_mode FROM events WHERE app_id = $1 ORDER BY id`,
          [tenant.appId],
        )) as { device_model: string; is_test_mode: boolean }[];
        expect(rows.map((row) => row.device_model)).toEqual(expected);
        expect(r.accepted).toBe(rows.length);
        // Metering follows the key: every accepted event of a live key, none of a test key.
        expect(r.metered).toBe(batch.testKey ? 0 : rows.length);
        if (batch.testKey) expect(rows.every((row) => row.is_test_mode)).toBe(true);

        if (batch.resend) {
          // A retry stores only the events that carry no eventId.
          const again = await send(key, body, batch.gzip);
          expect(again.status).toBe(200);
          const a = again.body as Result;
          expect(a.accepted + a.duplicates + a.rejected).toBe(a.received);
          expect(a.rejected).toBe(r.rejected);
          const withoutId = expected.filter(
            (tag) => typeof (events[Number(tag.slice(1))] as { eventId?: unknown }).eventId !== 'string',
          ).length;
          expect(a.accepted).toBe(withoutId);
          expect(await storedEventCount(t.db, tenant.appId)).toBe(rows.length + withoutId);
        }
      }),
      { numRuns: 40 },
    );
  });
});
