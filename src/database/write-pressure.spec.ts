import { WritePressure } from './write-pressure';

describe('WritePressure', () => {
  it('is busy for the given time after a write, and not before any', () => {
    const pressure = new WritePressure();
    expect(pressure.busy(250, 1_000)).toBe(false);
    pressure.noteWrite(1_000);
    expect(pressure.busy(250, 1_100)).toBe(true);
    expect(pressure.busy(250, 1_250)).toBe(false);
  });
});
