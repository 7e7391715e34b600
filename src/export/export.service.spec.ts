import { nextAsk } from './export.service';

const MOST = 5000;
const BOUND = 4 * 1_048_576;

describe('nextAsk (what the next chunk asks for)', () => {
  it('doubles while chunks of small rows come whole, up to the most', () => {
    expect(nextAsk(100, 100 * 250, { limit: 100, weigh: false }, MOST, BOUND)).toEqual({
      limit: 200,
      weigh: false,
    });
    expect(nextAsk(3200, 3200 * 250, { limit: 3200, weigh: false }, MOST, BOUND)).toEqual({
      limit: MOST,
      weigh: false,
    });
    expect(nextAsk(MOST, MOST * 250, { limit: MOST, weigh: false }, MOST, BOUND)).toEqual({
      limit: MOST,
      weigh: false,
    });
  });

  it("asks for no more rows of the last chunk's average size than fit in the bound", () => {
    // 29 KB events: 144 fit in 4 MiB.
    expect(nextAsk(100, 100 * 29_000, { limit: MOST, weigh: true }, MOST, BOUND)).toEqual({
      limit: 144,
      weigh: false,
    });
    expect(nextAsk(144, 144 * 29_000, { limit: 144, weigh: false }, MOST, BOUND)).toEqual({
      limit: 144,
      weigh: false,
    });
  });

  it('grows back once the rows are small again, and never asks for none', () => {
    expect(nextAsk(144, 144 * 300, { limit: 144, weigh: false }, MOST, BOUND)).toEqual({
      limit: 288,
      weigh: false,
    });
    expect(nextAsk(1, 50_000_000, { limit: 1, weigh: false }, MOST, BOUND)).toEqual({
      limit: 1,
      weigh: false,
    });
  });
});
