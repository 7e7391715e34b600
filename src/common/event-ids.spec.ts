import { randomBytes, randomUUID } from 'node:crypto';
import fc from 'fast-check';
import {
  EVENT_ID_PATTERN,
  parseEventId,
  presentEventId,
  sealEventIdBlocks,
  writePresentedEventId,
} from './event-ids';

describe('event ids', () => {
  const secret = randomBytes(32);
  const app = randomUUID();

  it('round-trips any stored id, and shows the same id each time', () => {
    fc.assert(
      fc.property(fc.bigInt(1n, 2n ** 63n - 1n), (id) => {
        const shown = presentEventId(secret, app, id);
        expect(shown).toMatch(EVENT_ID_PATTERN);
        expect(presentEventId(secret, app, id)).toBe(shown);
        expect(parseEventId(secret, app, shown)).toBe(id);
      }),
    );
  });

  it('seals many ids in one call, written in place, exactly as presentEventId shows each', () => {
    fc.assert(
      fc.property(fc.array(fc.bigInt(1n, 2n ** 63n - 1n), { minLength: 1, maxLength: 50 }), (ids) => {
        const blocks = Buffer.alloc(ids.length * 16);
        ids.forEach((id, i) => blocks.writeBigUInt64BE(id, i * 16));
        const sealed = sealEventIdBlocks(secret, app, blocks);
        const out = Buffer.alloc(ids.length * 22);
        ids.forEach((_, i) => writePresentedEventId(sealed, i * 16, out, i * 22));
        expect(out.toString('latin1')).toBe(ids.map((id) => presentEventId(secret, app, id)).join(''));
      }),
    );
  });

  it('consecutive ids show nothing of their order or distance', () => {
    // 40 consecutive ids: sorted by chance once in 40! tries.
    const shown = Array.from({ length: 40 }, (_, i) => presentEventId(secret, app, BigInt(i + 1)));
    expect(new Set(shown).size).toBe(40);
    expect([...shown].sort()).not.toEqual(shown);
  });

  it("refuses another app's id, another secret, any changed character and malformed input", () => {
    const shown = presentEventId(secret, app, 42n);
    expect(parseEventId(secret, randomUUID(), shown)).toBeNull();
    expect(parseEventId(randomBytes(32), app, shown)).toBeNull();
    expect(parseEventId(secret, app.toUpperCase(), shown)).toBe(42n);
    for (let i = 0; i < shown.length; i++) {
      const swapped = shown[i] === 'A' ? 'B' : 'A';
      expect(parseEventId(secret, app, shown.slice(0, i) + swapped + shown.slice(i + 1))).toBeNull();
    }
    for (const bad of ['', '42', '!'.repeat(22), shown + 'A', shown.slice(1), 'A'.repeat(22)]) {
      expect(parseEventId(secret, app, bad)).toBeNull();
    }
  });
});
