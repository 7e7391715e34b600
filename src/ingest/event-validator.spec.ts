import {
  EventRules,
  EventValidator,
  scanText,
  TEXT_CONTROL,
  TEXT_OK,
  TEXT_TOO_LONG,
  TEXT_UNSTORABLE,
} from './event-validator';
import { normaliseLocale, normaliseTimezone } from './context-formats';
import { DAY_MS as DAY } from '@app/common/time';

const NOW = 1_763_780_000_000;

function rules(overrides: Partial<EventRules> = {}): EventRules {
  return {
    receivedAt: NOW,
    skewMs: 0,
    oldestTs: NOW - 7 * DAY,
    maxEventBytes: 32_768,
    piiPolicy: 'redact',
    forceTestMode: false,
    pseudonymise: (kind, value) => `hmac:${kind}:${value.length}`,
    ...overrides,
  };
}

function check(event: unknown, overrides: Partial<EventRules> = {}) {
  const v = new EventValidator(rules(overrides));
  const accepted = v.validate(event, 0);
  return { accepted, errors: v.errors, warnings: v.warnings };
}

function rejectedWith(event: unknown, field: string, code: string, overrides: Partial<EventRules> = {}) {
  const { accepted, errors } = check(event, overrides);
  expect(accepted).toBeNull();
  expect(errors).toContainEqual(
    expect.objectContaining({ index: 0, field, code, message: expect.any(String) }),
  );
}

describe('EventValidator', () => {
  it('accepts a full event and normalises it', () => {
    const { accepted, errors, warnings } = check({
      eventName: 'Checkout.completed',
      anonymousUserId: 'u-1',
      sessionId: 's-1',
      eventTime: NOW - 1000,
      eventId: 'e-1',
      isTestMode: false,
      platform: 'ios',
      appVersion: '2.4.1',
      buildNumber: '241',
      osVersion: '18.1',
      deviceModel: 'iPhone16,2',
      locale: 'en_us',
      timezone: 'europe/paris',
      floatValue: 9.99,
      payload: { plan: 'pro', seats: 3, trial: false },
    });
    expect(errors).toEqual([]);
    expect(warnings).toEqual([]);
    expect(accepted).toEqual({
      index: 0,
      eventId: 'e-1',
      eventName: 'Checkout.completed',
      anonymousUserId: 'u-1',
      sessionId: 's-1',
      eventTime: NOW - 1000,
      ts: NOW - 1000,
      isTestMode: false,
      platform: 'ios',
      appVersion: '2.4.1',
      buildNumber: '241',
      osVersion: '18.1',
      deviceModel: 'iPhone16,2',
      locale: 'en-US',
      timezone: 'Europe/Paris',
      floatValue: 9.99,
      payload: { plan: 'pro', seats: 3, trial: false },
    });
  });

  it('treats null like absent for optional fields', () => {
    const { accepted, warnings } = check({ eventName: 'a', sessionId: null, eventTime: null, payload: null });
    expect(warnings).toEqual([]);
    expect(accepted).toMatchObject({ sessionId: null, eventTime: null, ts: NOW, payload: null });
  });

  it.each([
    [42, 'event', 'invalid_type'],
    [[], 'event', 'invalid_type'],
    [{}, 'eventName', 'missing_field'],
    [{ eventName: null }, 'eventName', 'missing_field'],
    [{ eventName: 7 }, 'eventName', 'invalid_type'],
    [{ eventName: '' }, 'eventName', 'invalid_value'],
    [{ eventName: 'a\nb' }, 'eventName', 'invalid_value'],
    [{ eventName: 'a'.repeat(201) }, 'eventName', 'too_long'],
    [{ eventName: 'a', sessionId: 5 }, 'sessionId', 'invalid_type'],
    [{ eventName: 'a', anonymousUserId: 'x'.repeat(201) }, 'anonymousUserId', 'too_long'],
    [{ eventName: 'a', eventId: '' }, 'eventId', 'invalid_value'],
    [{ eventName: 'a', eventId: 'a\u0000b' }, 'eventId', 'unstorable_value'],
    [{ eventName: 'a', eventTime: '1700000000000' }, 'eventTime', 'invalid_type'],
    [{ eventName: 'a', eventTime: 1.5 }, 'eventTime', 'invalid_value'],
    [{ eventName: 'a', eventTime: -1 }, 'eventTime', 'invalid_value'],
    [{ eventName: 'a', isTestMode: 'yes' }, 'isTestMode', 'invalid_type'],
    [{ eventName: 'a', floatValue: '1.5' }, 'floatValue', 'invalid_type'],
    [{ eventName: 'a', floatValue: Infinity }, 'floatValue', 'invalid_value'],
    [{ eventName: 'a', buildNumber: 241 }, 'buildNumber', 'invalid_type'],
    [{ eventName: 'a', platform: 'p'.repeat(101) }, 'platform', 'too_long'],
    [{ eventName: 'a', locale: 5 }, 'locale', 'invalid_type'],
    [{ eventName: 'a', timezone: false }, 'timezone', 'invalid_type'],
    [{ eventName: 'a', payload: [] }, 'payload', 'invalid_type'],
    [{ eventName: 'a', payload: 'x' }, 'payload', 'invalid_type'],
    [{ eventName: 'a', payload: { a: { b: 1 } } }, 'payload.a', 'nested_value'],
    [{ eventName: 'a', payload: { a: [1] } }, 'payload.a', 'nested_value'],
    [{ eventName: 'a', payload: { '': 1 } }, 'payload', 'invalid_value'],
    [{ eventName: 'a', payload: { ['k'.repeat(129)]: 1 } }, `payload.${'k'.repeat(128)}…`, 'too_long'],
    [{ eventName: 'a', payload: { a: 'v'.repeat(1025) } }, 'payload.a', 'too_long'],
    [{ eventName: 'a', payload: { a: '\ud800' } }, 'payload.a', 'unstorable_value'],
    [{ eventName: 'a', payload: { 'k\u0000': 1 } }, 'payload.k\u0000', 'unstorable_value'],
    [{ eventName: 'a', payload: { n: NaN } }, 'payload.n', 'invalid_value'],
    [{ eventName: 'a', eventTime: NOW - 8 * DAY }, 'eventTime', 'event_too_old'],
  ])('rejects %j: %s %s', (event, field, code) => rejectedWith(event, field, code));

  it.each([
    ['plain', TEXT_OK],
    ['a\u0000', TEXT_UNSTORABLE],
    ['\ud800', TEXT_UNSTORABLE],
    ['x\udc00y', TEXT_UNSTORABLE],
    ['\ud800\ud800', TEXT_UNSTORABLE],
    ['tab\t', TEXT_CONTROL],
    ['del\u007f', TEXT_CONTROL],
    ['c1\u0085', TEXT_CONTROL],
    ['😀\u00e9', TEXT_OK],
  ])('scanText %j', (s, status) => expect(scanText(s, 10, true)).toBe(status));

  it('scanText reports control characters only when asked', () => {
    expect(scanText('tab\t', 10, false)).toBe(TEXT_OK);
  });

  it('rejects a payload of more than 100 keys', () => {
    const payload = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`k${i}`, i]));
    rejectedWith({ eventName: 'a', payload }, 'payload', 'too_many_keys');
    const hundred = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`k${i}`, i]));
    expect(check({ eventName: 'a', payload: hundred }).accepted).not.toBeNull();
  });

  it('counts characters as code points', () => {
    expect(scanText('😀'.repeat(200), 200, false)).toBe(TEXT_OK);
    expect(scanText('😀'.repeat(201), 200, false)).toBe(TEXT_TOO_LONG);
    expect(scanText('a'.repeat(199) + '😀', 200, false)).toBe(TEXT_OK);
    expect(check({ eventName: '😀'.repeat(200) }).accepted).not.toBeNull();
  });

  it('rejects an event larger than the byte limit by itself', () => {
    const big = {
      eventName: 'a',
      payload: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${i}`, 'é'.repeat(1000)])),
    };
    rejectedWith(big, 'event', 'event_too_large');
    const { errors } = check(big);
    expect(errors).toHaveLength(1);
    // The bound is only an estimate: an event under the limit is measured, then accepted.
    expect(
      check({ eventName: 'a', payload: { a: 'x'.repeat(1000) } }, { maxEventBytes: 2000 }).accepted,
    ).not.toBeNull();
    rejectedWith({ eventName: 'a', extra: { deep: 'x'.repeat(300) } }, 'event', 'event_too_large', {
      maxEventBytes: 256,
    });
  });

  it('keeps payload keys such as __proto__ as plain data', () => {
    const event = JSON.parse('{"eventName":"a","payload":{"__proto__":"x","constructor":"y","n":null}}');
    const { accepted, warnings } = check(event);
    expect(warnings).toEqual([expect.objectContaining({ field: 'payload.n', code: 'null_value_dropped' })]);
    expect(Object.keys(accepted!.payload!)).toEqual(['__proto__', 'constructor']);
    expect(JSON.stringify(accepted!.payload)).toBe('{"__proto__":"x","constructor":"y"}');
    expect(Object.getPrototypeOf(accepted!.payload)).toBeNull();
  });

  it('lists the event id on its issues, at most 10 of each kind per event', () => {
    const payload = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`k${i}`, [i]]));
    const { errors } = check({ eventName: 'a', eventId: 'e-9', payload });
    expect(errors).toHaveLength(10);
    expect(errors.every((e) => e.eventId === 'e-9')).toBe(true);
  });

  describe('warnings', () => {
    it.each([
      [{ eventName: 'a', colour: 'red' }, 'colour', 'ignored_field'],
      [{ eventName: 'a', privacyMode: 'strict' }, 'privacyMode', 'ignored_field'],
      [{ eventName: 'a', locale: 'not a locale' }, 'locale', 'invalid_format'],
      [{ eventName: 'a', timezone: 'Mars/Olympus' }, 'timezone', 'invalid_format'],
      [{ eventName: 'a', payload: { a: null } }, 'payload.a', 'null_value_dropped'],
      [{ eventName: 'a', payload: { a: 'mail ann@example.com' } }, 'payload.a', 'pii_redacted'],
      [{ eventName: 'a', anonymousUserId: 'ann@example.com' }, 'anonymousUserId', 'pii_pseudonymised'],
      [{ eventName: 'a', sessionId: 's', privacyMode: 'unlinked' }, 'privacyMode', 'unlinked'],
      [{ eventName: 'a', eventTime: NOW + 11 * 60_000 }, 'eventTime', 'future_time_clamped'],
    ])('%j: %s %s', (event, field, code) => {
      const { accepted, warnings, errors } = check(event);
      expect(errors).toEqual([]);
      expect(accepted).not.toBeNull();
      expect(warnings).toContainEqual(
        expect.objectContaining({ index: 0, field, code, message: expect.any(String) }),
      );
    });

    it('drops a bad locale or time zone but keeps the event', () => {
      const { accepted } = check({ eventName: 'a', locale: 'C', timezone: '+25:00' });
      expect(accepted).toMatchObject({ locale: null, timezone: null });
      expect(check({ eventName: 'a', timezone: '-03:30' }).accepted?.timezone).toBe('-03:30');
    });

    it('corrects the client clock skew, then clamps the future', () => {
      const skewed = check({ eventName: 'a', eventTime: NOW - 3_600_000 - 5000 }, { skewMs: 3_600_000 });
      expect(skewed.accepted?.ts).toBe(NOW - 5000);
      expect(skewed.accepted?.eventTime).toBe(NOW - 3_600_000 - 5000);
      expect(skewed.warnings).toEqual([expect.objectContaining({ code: 'clock_skew_corrected' })]);
      const future = check({ eventName: 'a', eventTime: NOW + 3_600_000 });
      expect(future.accepted?.ts).toBe(NOW);
      // An event without eventTime uses the receive time and needs no correction.
      expect(check({ eventName: 'a' }, { skewMs: 3_600_000 }).warnings).toEqual([]);
    });

    it('strips ids of unlinked events and pseudonymises email and phone user ids', () => {
      expect(
        check({ eventName: 'a', anonymousUserId: 'u', sessionId: 's', privacyMode: 'unlinked' }).accepted,
      ).toMatchObject({
        anonymousUserId: null,
        sessionId: null,
      });
      expect(check({ eventName: 'a', anonymousUserId: '+1 415 555 0123' }).accepted?.anonymousUserId).toBe(
        'hmac:phone:15',
      );
    });

    it('forces test mode for a test key', () => {
      expect(check({ eventName: 'a', isTestMode: false }, { forceTestMode: true }).accepted?.isTestMode).toBe(
        true,
      );
    });
  });

  describe('PII policies on payload strings', () => {
    const event = { eventName: 'a', payload: { card: '4111 1111 1111 1111', ok: 'fine' } };

    it('redact replaces the value', () => {
      expect(check(event).accepted?.payload).toEqual({ card: '[redacted]', ok: 'fine' });
    });

    it('reject rejects the event', () =>
      rejectedWith(event, 'payload.card', 'pii_detected', { piiPolicy: 'reject' }));

    it('allow keeps the value', () => {
      const { accepted, warnings } = check(event, { piiPolicy: 'allow' });
      expect(accepted?.payload).toBe(event.payload);
      expect(warnings).toEqual([]);
    });
  });

  it('drops the warnings of a rejected event', () => {
    const v = new EventValidator(rules());
    expect(v.validate({ eventName: 'a', colour: 'red', eventTime: -5 }, 3)).toBeNull();
    expect(v.warnings).toEqual([]);
    expect(v.errors).toEqual([expect.objectContaining({ index: 3, field: 'eventTime' })]);
  });
});

describe('context formats', () => {
  it.each([
    ['en-US', 'en-US'],
    ['en_US', 'en-US'],
    ['EN-gb', 'en-GB'],
    ['zh-Hant-TW', 'zh-Hant-TW'],
    ['fr', 'fr'],
  ])('locale %s → %s', (input, output) => expect(normaliseLocale(input)).toBe(output));

  it.each(['', 'C', '12-US', 'en US', 'e', 'en--US'])('locale %p is invalid', (input) =>
    expect(normaliseLocale(input)).toBeNull(),
  );

  it.each([
    ['Europe/Paris', 'Europe/Paris'],
    ['america/new_york', 'America/New_York'],
    ['UTC', 'UTC'],
    ['+05:30', '+05:30'],
    ['-14:00', '-14:00'],
    ['+14:00', '+14:00'],
    ['Nowhere/Town', null],
    ['05:30', null],
  ])('timezone %s → %s', (input, output) => expect(normaliseTimezone(input)).toBe(output));
});
