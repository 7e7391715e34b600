import { createHmac, randomBytes } from 'node:crypto';
import fc from 'fast-check';
import {
  accountPseudonyms,
  containsEmail,
  detectPii,
  identifierKind,
  isEmail,
  isPhone,
  keyedSha256,
  luhnValid,
  pseudonymise,
  pseudonymiseAccount,
  PSEUDONYM_PREFIX,
} from './pii';

describe('PII detection', () => {
  describe('email addresses', () => {
    it.each([
      'ann@example.com',
      'contact me at first.last+tag@mail.example.co.uk today',
      'ANN_O%X@EXAMPLE.IO.',
      'mailto:a-b@c-d.org',
    ])('finds one in %p', (s) => {
      expect(containsEmail(s)).toBe(true);
      expect(detectPii(s)).toBe('email');
    });

    it.each([
      '@handle',
      'user@localhost',
      'a@b.c',
      'price @ 5.00',
      'x@.com',
      'x@a..com',
      'foo@bar.c0m',
      'no at sign',
    ])('ignores %p', (s) => {
      expect(containsEmail(s)).toBe(false);
      expect(detectPii(s)).toBeNull();
    });

    it('tells a whole-value address from one inside text', () => {
      expect(isEmail(' Ann@Example.com ')).toBe(true);
      expect(isEmail('write to ann@example.com')).toBe(false);
      expect(isEmail('a@b.com@c.com')).toBe(false);
    });
  });

  describe('phone numbers', () => {
    it.each([
      '+14155550123',
      '+1 (415) 555-0123',
      'call +44 20 7946 0958 now',
      '555-123-4567',
      '(555) 123 4567',
      '555.123.4567',
      '020 7946 0958',
      '06 12 34 56 78',
      '1-555-123-4567',
    ])('finds one in %p', (s) => expect(detectPii(s)).toBe('phone'));

    it.each([
      '5551234567', // bare digits: an id or an epoch in seconds
      '1763780000123', // epoch ms (and not a card: starts with 1)
      '2026-11-22 10:30:00',
      '22.11.2026',
      '192.168.100.200',
      'v1.2.3',
      'order 12345',
      '550e8400-e29b-41d4-a716-446655440000',
      'abc555-123-4567',
      '+1234', // too short
      '3+4=7',
    ])('ignores %p', (s) => expect(detectPii(s)).toBeNull());

    it('tells a whole-value phone from one inside text', () => {
      expect(isPhone('+1 415 555 0123')).toBe(true);
      expect(isPhone('call +1 415 555 0123')).toBe(false);
      expect(isPhone('4111 1111 1111 1111')).toBe(false);
    });
  });

  describe('card numbers', () => {
    it('implements the Luhn check', () => {
      expect(luhnValid('4111111111111111')).toBe(true);
      expect(luhnValid('4111111111111112')).toBe(false);
      expect(luhnValid('79927398713')).toBe(true);
    });

    it.each([
      '4111111111111111',
      '4111 1111 1111 1111',
      'card: 5555-5555-5555-4444, exp 12/30',
      '378282246310005',
      '6011111111111117',
    ])('finds one in %p', (s) => expect(detectPii(s)).toBe('card'));

    it.each([
      '4111111111111112', // fails Luhn
      '1111111111111111111111', // too long
      '9111111111111111',
      '4111.1111.1111.1111',
    ])('ignores %p', (s) => expect(detectPii(s)).not.toBe('card'));
  });

  it('classifies user ids', () => {
    expect(identifierKind('ann@example.com')).toBe('email');
    expect(identifierKind('+33 6 12 34 56 78')).toBe('phone');
    expect(identifierKind('u_8f14e45fceea167a')).toBeNull();
    expect(identifierKind('123456789012')).toBeNull();
  });

  it('pseudonymises with a keyed, normalised HMAC', () => {
    const secret = randomBytes(32);
    const a = pseudonymise(secret, 'email', 'Ann@Example.com');
    expect(a).toMatch(/^hmac:[0-9a-f]{64}$/);
    expect(pseudonymise(secret, 'email', ' ann@example.com')).toBe(a);
    expect(pseudonymise(randomBytes(32), 'email', 'ann@example.com')).not.toBe(a);
    expect(pseudonymise(secret, 'phone', '+1 (415) 555-0123')).toBe(
      pseudonymise(secret, 'phone', '+14155550123'),
    );
  });

  it('computes the keyed hash as createHmac does, whatever the key and the text', () => {
    const texts = fc.oneof(
      fc.string({ maxLength: 400 }),
      fc.string({ maxLength: 400, unit: 'grapheme' }),
      // Lone surrogates: both encode them as U+FFFD.
      fc.string({ maxLength: 40, unit: fc.constantFrom('a', '\ud800', '\udc00', '😀', 'é') }),
      fc.constantFrom('', 'x'.repeat(55), 'x'.repeat(56), 'x'.repeat(341), 'x'.repeat(342), 'é'.repeat(700)),
    );
    const keys = fc.constantFrom(
      randomBytes(32),
      randomBytes(64),
      randomBytes(65),
      randomBytes(0),
      randomBytes(7),
    );
    fc.assert(
      fc.property(keys, fc.array(texts, { minLength: 1, maxLength: 4 }), (key, batch) => {
        const hmac = keyedSha256(key);
        const prefixed = keyedSha256(key, 'hmac:');
        for (const text of batch) {
          const expected = createHmac('sha256', key).update(text).digest('hex');
          expect(hmac(text)).toBe(expected);
          expect(prefixed(text)).toBe(`hmac:${expected}`);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('gives an account id the same pseudonym one at a time or many under one secret', () => {
    const secret = randomBytes(32);
    const ofRequest = accountPseudonyms(secret);
    // The definition: an email or phone as an anonymousUserId gets it, any other id its HMAC as sent.
    const byDefinition = (id: string) => {
      const kind = identifierKind(id);
      if (kind !== null) return pseudonymise(secret, kind, id);
      return PSEUDONYM_PREFIX + createHmac('sha256', secret).update(id).digest('hex');
    };
    const ids = [
      'acct-42',
      'Acct-42',
      'ann@example.com',
      'Ann@Example.com ',
      '+1 (415) 555-0123',
      'ü-1',
      '42',
    ];
    for (const id of [...ids, 'a'.repeat(2000)]) {
      expect(ofRequest(id)).toBe(byDefinition(id));
      expect(pseudonymiseAccount(secret, id)).toBe(byDefinition(id));
    }
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), (id) => {
        expect(ofRequest(id)).toBe(byDefinition(id));
        expect(pseudonymiseAccount(secret, id)).toBe(byDefinition(id));
      }),
    );
  });

  it('answers on arbitrary and hostile strings without throwing', () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 300, unit: fc.constantFrom('a', '@', '.', '1', ' ', '-', '+', '(') }),
        (s) => {
          expect([null, 'email', 'phone', 'card']).toContain(detectPii(s));
        },
      ),
    );
    expect(detectPii('a'.repeat(1000) + '@')).toBeNull();
    expect(detectPii('@'.repeat(1024))).toBeNull();
    expect(detectPii('a@'.repeat(512))).toBeNull();
    expect(detectPii('+1'.repeat(512))).toBeNull();
  });
});
