import { keptEvent, rejectedRef } from './kept-rejections';
import { REDACTED } from './ingest.limits';

const RECEIVED = 1_763_780_000_000;
const keep = (raw: unknown, testMode = false) =>
  keptEvent(raw, RECEIVED, testMode, (kind, value) => `hmac:${kind}:${value.length}`);

describe('keptEvent', () => {
  it('keeps each storable field and the receive time, and names an event without a name', () => {
    const kept = keep({ anonymousUserId: 'u-1', eventId: 'e-1', platform: 'ios', floatValue: 2.5 });
    expect(kept).toMatchObject({
      eventName: '(invalid)',
      anonymousUserId: 'u-1',
      eventId: 'e-1',
      platform: 'ios',
      floatValue: 2.5,
      ts: RECEIVED,
      isTestMode: false,
    });
  });

  it('leaves out text PostgreSQL cannot store: control characters and lone surrogates', () => {
    const kept = keep({
      eventName: 'Bad\u0000name',
      platform: 'x\ud800',
      locale: 'de\u0085',
      appVersion: '1.0',
    });
    expect(kept.eventName).toBe('(invalid)');
    expect(kept.platform).toBeNull();
    expect(kept.locale).toBeNull();
    expect(kept.appVersion).toBe('1.0');
  });

  it('keeps text with paired surrogates (an emoji) as it is', () => {
    expect(keep({ eventName: 'Liked 👍' }).eventName).toBe('Liked 👍');
  });

  it('keeps the flat, storable payload with personal data redacted, and never a raw email user id', () => {
    const kept = keep({
      eventName: 'Signup',
      anonymousUserId: 'ann@example.com',
      payload: {
        plan: 'pro',
        seats: 3,
        contact: 'bob@example.com',
        nested: { a: 1 },
        'bad\u0001key': 1,
        note: 'y'.repeat(700),
      },
    });
    expect(kept.anonymousUserId).toBe('hmac:email:15');
    expect(kept.payload).toEqual({ plan: 'pro', seats: 3, contact: REDACTED, note: 'y'.repeat(700) });
  });

  it('marks every event of a test key as a test event', () => {
    expect(keep({ eventName: 'A' }, true).isTestMode).toBe(true);
  });
});

describe('rejectedRef', () => {
  it('names the event by position and by the id its record would keep', () => {
    expect(rejectedRef({ index: 3, code: 'event_too_old', raw: { eventId: 'e-3' }, event: null })).toEqual({
      index: 3,
      eventId: 'e-3',
    });
    expect(rejectedRef({ index: 4, code: 'invalid_type', raw: { eventId: 42 }, event: null })).toEqual({
      index: 4,
      eventId: null,
    });
    expect(rejectedRef({ index: 5, code: 'invalid_type', raw: 'not an event', event: null })).toEqual({
      index: 5,
      eventId: null,
    });
  });
});
