import 'reflect-metadata';
import fc from 'fast-check';
import { validateSync } from 'class-validator';
import { EventValidator } from './event-validator';
import { IngestBatchDto, IngestEventDto } from './ingest.dto';

// The hand-written validator and the class-validator DTOs must accept and reject the same
// events. Left out of the comparison, because the DTOs cannot know them: the serialized size
// limit (configuration), the age of eventTime (the clock), the `reject` PII policy, and the
// locale and time zone formats (a bad one only drops the field with a warning, so it never
// decides acceptance).

const NOW = Date.now();

function fastVerdict(event: unknown): boolean {
  const v = new EventValidator({
    receivedAt: NOW,
    skewMs: 0,
    oldestTs: -Infinity,
    maxEventBytes: Infinity,
    piiPolicy: 'redact',
    forceTestMode: false,
    pseudonymise: () => 'hmac:x',
  });
  return v.validate(event, 0) !== null;
}

// Copies own properties with defineProperty: class-transformer's plainToInstance throws on a
// "__proto__" key, and Object.assign would treat one as the prototype.
function toDto(event: unknown): unknown {
  if (typeof event !== 'object' || event === null || Array.isArray(event)) return event;
  const dto = new IngestEventDto();
  for (const key of Object.keys(event)) {
    Object.defineProperty(dto, key, {
      value: (event as Record<string, unknown>)[key],
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return dto;
}

function dtoVerdict(event: unknown): boolean {
  const batch = new IngestBatchDto();
  batch.events = [toDto(event) as IngestEventDto];
  return validateSync(batch).length === 0;
}

const oddText = fc.oneof(
  fc.constant(''),
  fc.constant('a\u0000b'),
  fc.constant('\ud800x'),
  fc.constant('x\udc00'),
  fc.constant('😀'),
  fc.constant('\ufe0f'),
  fc.constant('tab\there'),
  fc.constant('\u0085'),
  fc.constant('ann@example.com'),
);

/** Strings around a length limit, in single- and double-unit characters. */
function textAround(max: number) {
  return fc.oneof(
    fc.string({ maxLength: 8 }),
    fc.string({ unit: 'grapheme-ascii', minLength: max - 1, maxLength: max + 1 }),
    fc.integer({ min: max - 1, max: max + 1 }).map((n) => '😀'.repeat(n)),
    fc.integer({ min: max - 2, max: max }).map((n) => 'a'.repeat(n) + '😀'),
    oddText,
  );
}

const notString = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constant([]),
  fc.constant({}),
);

/** Mostly ordinary text, sometimes text at a length limit or odd, sometimes not a string. */
function text(max: number) {
  return fc.oneof(
    { weight: 14, arbitrary: fc.string({ minLength: 1, maxLength: 20 }) },
    { weight: 1, arbitrary: textAround(max) },
    { weight: 1, arbitrary: notString },
  );
}

const rarely = <T, U>(usual: fc.Arbitrary<T>, odd: fc.Arbitrary<U>) =>
  fc.oneof({ weight: 12, arbitrary: usual }, { weight: 1, arbitrary: odd });

const payloadValue = fc.oneof(
  {
    weight: 10,
    arbitrary: fc.oneof(fc.string({ maxLength: 12 }), fc.integer(), fc.boolean(), fc.constant(null)),
  },
  {
    weight: 1,
    arbitrary: fc.oneof(textAround(1024), fc.double(), fc.constant({ nested: 1 }), fc.constant([1, 2])),
  },
);

const payloadKey = fc.oneof(
  { weight: 20, arbitrary: fc.string({ minLength: 1, maxLength: 10 }) },
  { weight: 2, arbitrary: fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty') },
  { weight: 1, arbitrary: textAround(128) },
);

const payload = fc.oneof(
  { weight: 6, arbitrary: fc.dictionary(payloadKey, payloadValue, { maxKeys: 6, noNullPrototype: true }) },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 99, max: 101 })
      .map((n) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i]))),
  },
);

const eventArb = fc.record(
  {
    eventName: text(200),
    anonymousUserId: text(200),
    sessionId: text(200),
    eventId: text(200),
    eventTime: rarely(
      fc.integer({ min: 0, max: NOW * 2 }),
      fc.oneof(
        fc.constantFrom(-1, 1.5, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER + 2, NaN, Infinity),
        notString,
        fc.string({ maxLength: 5 }),
      ),
    ),
    isTestMode: rarely(fc.boolean(), fc.oneof(notString, fc.constant('true'))),
    floatValue: rarely(
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      fc.oneof(fc.double(), notString, fc.constant('1.5')),
    ),
    platform: text(100),
    appVersion: text(100),
    buildNumber: rarely(text(100), fc.integer()),
    osVersion: text(100),
    deviceModel: text(100),
    locale: rarely(fc.constantFrom('en-US', 'en_US', 'xx', 'not a locale'), notString),
    timezone: rarely(fc.constantFrom('Europe/Paris', '+05:30', 'Mars/Base'), notString),
    payload: rarely(payload, notString),
    privacyMode: fc.oneof(fc.constant('unlinked'), notString, fc.string()),
    colour: fc.string(),
  },
  { requiredKeys: ['eventName'] },
);

const anyEvent = fc.oneof({ weight: 12, arbitrary: eventArb }, { weight: 1, arbitrary: notString });

describe('IngestEventDto and EventValidator agree', () => {
  it('on accept or reject for generated events', () => {
    let accepted = 0;
    fc.assert(
      fc.property(anyEvent, (event) => {
        const fast = fastVerdict(event);
        expect(fast).toBe(dtoVerdict(event));
        if (fast) accepted++;
      }),
      { numRuns: 4000 },
    );
    // The generator must produce both outcomes for the comparison to mean anything.
    expect(accepted).toBeGreaterThan(500);
  });

  it('on events with only the required field', () => {
    fc.assert(
      fc.property(fc.record({ eventName: textAround(200) }), (event) => {
        expect(fastVerdict(event)).toBe(dtoVerdict(event));
      }),
    );
  });

  it('for a known valid and a known invalid event', () => {
    const good = { eventName: 'App.opened', payload: { plan: 'pro', n: 1, ok: true, gone: null } };
    const bad = { eventName: 'App.opened', buildNumber: 241 };
    expect([fastVerdict(good), dtoVerdict(good)]).toEqual([true, true]);
    expect([fastVerdict(bad), dtoVerdict(bad)]).toEqual([false, false]);
  });
});
