import { nextAsk } from './export.service';

const MOST = 5000;
const BOUND = 4 * 1_048_576;
const small = { limit: MOST, weigh: false };

describe('nextAsk (what the next chunk asks for)', () => {
  it('asks for the most, unweighed, while chunks of small rows come whole', () => {
    expect(nextAsk(MOST, MOST * 250, small, MOST, BOUND)).toEqual(small);
  });

  it('asks for a quarter more than a chunk cut short by its byte bound gave, weighed', () => {
    expect(nextAsk(140, 140 * 29_000, { limit: MOST, weigh: true }, MOST, BOUND)).toEqual({
      limit: 175,
      weigh: true,
    });
    expect(nextAsk(140, 140 * 29_000, { limit: 175, weigh: true }, MOST, BOUND)).toEqual({
      limit: 175,
      weigh: true,
    });
  });

  it("weighs while the most rows of the last chunk's size could pass half the bound", () => {
    expect(nextAsk(MOST, MOST * 1_000, small, MOST, BOUND).weigh).toBe(true);
    expect(nextAsk(MOST, MOST * 400, small, MOST, BOUND).weigh).toBe(false);
  });

  it('grows back by doubling once chunks come whole again, up to the most', () => {
    expect(nextAsk(175, 175 * 300, { limit: 175, weigh: true }, MOST, BOUND)).toEqual({
      limit: 350,
      weigh: false,
    });
    expect(nextAsk(4000, 4000 * 300, { limit: 4000, weigh: false }, MOST, BOUND).limit).toBe(MOST);
  });
});
