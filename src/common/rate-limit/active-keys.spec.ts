import { ActiveKeys } from './active-keys';

describe('ActiveKeys', () => {
  it('counts another key as active for the window after its last request, then forgets it', () => {
    const keys = new ActiveKeys(1000);
    keys.touch('a', 0);
    expect(keys.othersActive('a', 0)).toBe(false);
    keys.touch('b', 100);
    expect(keys.othersActive('a', 100)).toBe(true);
    expect(keys.othersActive('b', 100)).toBe(true);
    // a was last seen at 0: gone at 1000; b, last seen at 100, stays until 1100.
    expect(keys.othersActive('b', 1000)).toBe(false);
    expect(keys.othersActive('a', 1099)).toBe(true);
    expect(keys.othersActive('a', 1100)).toBe(false);
    expect(keys.size).toBe(0);
  });

  it('a new request renews a key', () => {
    const keys = new ActiveKeys(1000);
    keys.touch('a', 0);
    keys.touch('b', 0);
    keys.touch('a', 900);
    expect(keys.othersActive('b', 1500)).toBe(true);
    expect(keys.othersActive('a', 1500)).toBe(false);
  });
});
