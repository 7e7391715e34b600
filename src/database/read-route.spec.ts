import { LagEstimator, parseLsn, ReadRoute } from './read-route';

describe('parseLsn', () => {
  it('reads the two hexadecimal halves of an LSN', () => {
    expect(parseLsn('0/3000000')).toBe(0x3000000n);
    expect(parseLsn('16/B374D848')).toBe((0x16n << 32n) + 0xb374d848n);
    expect(parseLsn(null)).toBeNull();
    expect(parseLsn('nope')).toBeNull();
  });
});

describe('LagEstimator', () => {
  it('is 0 when the replica has replayed what the primary wrote, however old its last commit', () => {
    const lag = new LagEstimator();
    expect(lag.estimate({ primaryLsn: 100n, replayLsn: 100n, replayAgeMs: 600_000 }, 0)).toBe(0);
    expect(lag.estimate({ primaryLsn: 100n, replayLsn: 100n, replayAgeMs: 601_000 }, 1_000)).toBe(0);
  });

  it('counts from the check that first saw unreplayed WAL when an idle primary starts writing', () => {
    const lag = new LagEstimator();
    lag.estimate({ primaryLsn: 100n, replayLsn: 100n, replayAgeMs: 600_000 }, 0);
    expect(lag.estimate({ primaryLsn: 200n, replayLsn: 100n, replayAgeMs: 601_000 }, 1_000)).toBe(0);
    expect(lag.estimate({ primaryLsn: 300n, replayLsn: 100n, replayAgeMs: 602_000 }, 2_000)).toBe(1_000);
    // Replay reached the first position: the next pending one counts.
    expect(lag.estimate({ primaryLsn: 300n, replayLsn: 200n, replayAgeMs: 10 }, 3_000)).toBe(10);
    expect(lag.estimate({ primaryLsn: 300n, replayLsn: 300n, replayAgeMs: 10 }, 4_000)).toBe(0);
  });

  it('trusts the replay age when the replica was already behind at the first check', () => {
    const lag = new LagEstimator();
    expect(lag.estimate({ primaryLsn: 200n, replayLsn: 100n, replayAgeMs: 45_000 }, 0)).toBe(45_000);
  });

  it('grows while replay is paused under writes, and is 0 for a server that is not a standby', () => {
    const lag = new LagEstimator();
    lag.estimate({ primaryLsn: 100n, replayLsn: 100n, replayAgeMs: 5 }, 0);
    for (let s = 1; s <= 10; s++)
      lag.estimate({ primaryLsn: 100n + BigInt(s), replayLsn: 100n, replayAgeMs: s * 1000 }, s * 1000);
    expect(lag.estimate({ primaryLsn: 120n, replayLsn: 100n, replayAgeMs: 11_000 }, 11_000)).toBe(10_000);
    expect(lag.estimate({ primaryLsn: 120n, replayLsn: null, replayAgeMs: null }, 12_000)).toBe(0);
  });
});

describe('ReadRoute', () => {
  it('starts on the replica, moves to the primary at once, and back after N healthy checks in a row', () => {
    const route = new ReadRoute(1_000, 3);
    expect(route.target).toBe('replica');
    expect(route.observe(0)).toBeNull();
    expect(route.observe(1_001)).toEqual({
      to: 'primary',
      reason: expect.stringContaining('READ_MAX_LAG_MS'),
    });
    expect(route.observe(10)).toBeNull();
    expect(route.observe(null)).toBeNull();
    expect(route.observe(10)).toBeNull();
    expect(route.observe(10)).toBeNull();
    expect(route.target).toBe('primary');
    expect(route.observe(10)).toEqual({ to: 'replica', reason: expect.stringContaining('3 checks') });
    expect(route.failed()).toEqual({ to: 'primary', reason: expect.any(String) });
    expect(route.failed()).toBeNull();
  });

  it('moves to the primary at the first check when the replica is unreachable from the start', () => {
    const route = new ReadRoute(1_000, 2);
    expect(route.observe(null)).toEqual({ to: 'primary', reason: 'the replica is unreachable' });
    expect(route.observe(0)).toBeNull();
    expect(route.observe(0)).toEqual({ to: 'replica', reason: expect.any(String) });
  });
});
