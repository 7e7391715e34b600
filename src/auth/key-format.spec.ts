import { generateKey, hashKey, maskKey, parseKey } from './key-format';

describe('key format', () => {
  it.each(['live', 'test', 'api'] as const)('generates %s keys that parse back', (kind) => {
    const key = generateKey(kind);
    expect(key).toMatch(new RegExp(`^tly_${kind}_[0-9A-Za-z]{49}$`));
    expect(parseKey(key)).toEqual({ kind });
  });

  it('refuses a key with one character changed (checksum)', () => {
    const key = generateKey('live');
    const i = 20;
    const swapped = key[i] === 'a' ? 'b' : 'a';
    expect(parseKey(key.slice(0, i) + swapped + key.slice(i + 1))).toBeNull();
  });

  it('refuses other shapes', () => {
    expect(parseKey('')).toBeNull();
    expect(parseKey('tly_prod_' + 'a'.repeat(49))).toBeNull();
    expect(parseKey(generateKey('api') + 'x')).toBeNull();
    expect(parseKey(generateKey('api').replace('tly_', 'abc_'))).toBeNull();
  });

  it('generates distinct keys and stable hashes', () => {
    const a = generateKey('live');
    const b = generateKey('live');
    expect(a).not.toEqual(b);
    expect(hashKey(a).equals(hashKey(a))).toBe(true);
    expect(hashKey(a)).toHaveLength(32);
  });

  it('masks keys', () => {
    expect(maskKey('live', 'a1B2')).toBe('tly_live_…a1B2');
  });
});
