import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { DeletionRow } from './deletion.repository';
import { ErasureLedger } from './erasure-ledger';

const H1 = 'a'.repeat(64);
const H2 = 'b'.repeat(64);

const row = (id: string): DeletionRow =>
  ({
    id,
    appId: '0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c',
    kind: 'users',
    userIds: ['raw-id-never-written'],
    suppress: true,
    requestedBy: { type: 'cli', osUser: 'ops' },
  }) as DeletionRow;

describe('ErasureLedger', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'tally-ledger-spec-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads a missing file as an empty ledger', async () => {
    expect(await new ErasureLedger(path.join(dir, 'none.ndjson')).read()).toEqual({
      entries: [],
      skippedLines: 0,
    });
  });

  it('appends one line per deletion, in a folder it creates, and once per id', async () => {
    const file = path.join(dir, 'sub', 'ledger.ndjson');
    const ledger = new ErasureLedger(file);
    await ledger.record(row('d1'), [H1, H2], Date.UTC(2026, 10, 27));
    await ledger.record(row('d1'), [H1, H2]);
    const text = await readFile(file, 'utf8');
    expect(text).not.toContain('raw-id-never-written');
    expect(text.split('\n')).toEqual([
      JSON.stringify({
        deletionId: 'd1',
        appId: '0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c',
        kind: 'users',
        at: '2026-11-27T00:00:00.000Z',
        userHashes: [H1, H2],
        suppress: true,
        requestedBy: { type: 'cli', osUser: 'ops' },
      }),
      '',
    ]);
  });

  it('skips a torn last line and damaged lines, keeps the first entry of an id, and appends after a torn line', async () => {
    const file = path.join(dir, 'ledger.ndjson');
    const first = new ErasureLedger(file);
    await first.record(row('d1'), [H1]);
    await writeFile(file, (await readFile(file, 'utf8')) + 'not json\n{"deletionId":"d2","app', {
      flag: 'w',
    });
    const second = new ErasureLedger(file);
    const read = await second.read();
    expect(read.skippedLines).toBe(2);
    expect(read.entries.map((e) => e.deletionId)).toEqual(['d1']);
    await second.record(row('d1'), [H1]);
    await second.record(row('d3'), [H2]);
    const lines = (await readFile(file, 'utf8')).split('\n');
    expect(lines).toHaveLength(5);
    expect(JSON.parse(lines[3])).toEqual(expect.objectContaining({ deletionId: 'd3', userHashes: [H2] }));
    expect((await new ErasureLedger(file).read()).entries.map((e) => e.deletionId)).toEqual(['d1', 'd3']);
  });
});
