import { ADVISORY_LOCKS } from './advisory-locks';

describe('advisory lock ids', () => {
  it('gives every kind of work an id of its own', () => {
    const ids = Object.values(ADVISORY_LOCKS);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(Number.isSafeInteger(id)).toBe(true);
  });
});
