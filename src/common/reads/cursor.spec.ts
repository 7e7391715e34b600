import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { decodeCursor, encodeCursor } from './cursor';

describe('events cursor', () => {
  const secret = randomBytes(32);
  const app = '0b6f3e0c-6a1e-4c83-9d43-3f1d2c6b9a10';
  const binding = JSON.stringify(['app', null, null, null, null, null, 'false']);

  it('round-trips any position', () => {
    fc.assert(
      fc.property(fc.bigInt(0n, 2n ** 63n - 1n), fc.bigInt(1n, 2n ** 63n - 1n), (receivedUs, id) => {
        const token = encodeCursor(secret, app, binding, { receivedUs, id });
        expect(token).toMatch(/^[A-Za-z0-9_-]+$/);
        expect(decodeCursor(secret, app, binding, token)).toEqual({ receivedUs, id });
      }),
    );
  });

  it('refuses a cursor with any single character changed', () => {
    const token = encodeCursor(secret, app, binding, { receivedUs: 1_763_780_000_123_456n, id: 42n });
    for (let i = 0; i < token.length; i++) {
      const swapped = token[i] === 'A' ? 'B' : 'A';
      expect(decodeCursor(secret, app, binding, token.slice(0, i) + swapped + token.slice(i + 1))).toBeNull();
    }
  });

  it('does not show the stored id', () => {
    const token = encodeCursor(secret, app, binding, { receivedUs: 7n, id: 0x0102030405060708n });
    expect(Buffer.from(token, 'base64url').includes(Buffer.from('0102030405060708', 'hex'))).toBe(false);
  });

  it('refuses another query, another secret and malformed input', () => {
    const token = encodeCursor(secret, app, binding, { receivedUs: 5n, id: 6n });
    expect(decodeCursor(secret, app, binding.replace('app', 'other'), token)).toBeNull();
    expect(decodeCursor(randomBytes(32), app, binding, token)).toBeNull();
    for (const bad of ['', '!!!', token + '=', token.slice(1), 'A'.repeat(token.length)]) {
      expect(decodeCursor(secret, app, binding, bad)).toBeNull();
    }
  });
});
