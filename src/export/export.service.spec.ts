import { nextLimit } from './export.service';

describe('nextLimit (the rows the next chunk asks for)', () => {
  it('asks for the most while chunks come whole', () => {
    expect(nextLimit(5000, 5000, 5000)).toBe(5000);
  });

  it('asks for twice what a chunk cut short by its byte bound gave, at least one row', () => {
    expect(nextLimit(140, 5000, 5000)).toBe(280);
    expect(nextLimit(140, 280, 5000)).toBe(280);
    expect(nextLimit(0, 280, 5000)).toBe(1);
  });

  it('grows back by doubling once chunks come whole again, up to the most', () => {
    expect(nextLimit(280, 280, 5000)).toBe(560);
    expect(nextLimit(4000, 4000, 5000)).toBe(5000);
  });
});
