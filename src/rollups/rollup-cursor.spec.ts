import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { signCursor } from '@app/common/reads/signed-cursor';
import { decodeRollupCursor, encodeRollupCursor } from './rollup-cursor';

describe('rollups cursor', () => {
  const secret = randomBytes(32);
  const binding = JSON.stringify(['rollups', 'app', null, null, '30d', null, 'false']);

  it('round-trips any position', () => {
    fc.assert(
      fc.property(
        fc.date({ min: new Date('1970-01-01'), max: new Date('2999-12-31'), noInvalidDate: true }),
        fc.string({ maxLength: 200, unit: 'grapheme' }),
        fc.boolean(),
        (date, eventName, isTestMode) => {
          const position = { day: date.toISOString().slice(0, 10), eventName, isTestMode };
          const token = encodeRollupCursor(secret, binding, position);
          expect(token).toMatch(/^[A-Za-z0-9_-]+$/);
          expect(token.length).toBeLessThanOrEqual(1200);
          expect(decodeRollupCursor(secret, binding, token)).toEqual(position);
        },
      ),
    );
  });

  it('refuses an altered cursor, another query, another secret and a cursor of another kind', () => {
    const token = encodeRollupCursor(secret, binding, {
      day: '2026-11-25',
      eventName: 'a.b',
      isTestMode: true,
    });
    for (let i = 0; i < token.length; i++) {
      const swapped = token[i] === 'A' ? 'B' : 'A';
      expect(
        decodeRollupCursor(secret, binding, token.slice(0, i) + swapped + token.slice(i + 1)),
      ).toBeNull();
    }
    expect(decodeRollupCursor(secret, binding.replace('30d', '7d'), token)).toBeNull();
    expect(decodeRollupCursor(randomBytes(32), binding, token)).toBeNull();
    expect(
      decodeRollupCursor(
        secret,
        binding,
        signCursor(secret, binding, Buffer.from([1, ...new Array<number>(16).fill(0)])),
      ),
    ).toBeNull();
    expect(decodeRollupCursor(secret, binding, 'A'.repeat(5000))).toBeNull();
  });
});
