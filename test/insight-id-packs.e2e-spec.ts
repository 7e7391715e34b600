// The dense numbers of insights in packs: the migration moves every numbered id into its pack and
// its `down` gives the same rows back; a lookup finds a number wherever its key's tail appears
// first in the pack, and stays exact when that place is inside another entry.
import { MIGRATIONS } from '@migrations/index';
import { InsightIdPacks1764600000000 } from '@migrations/1764600000000-insight-id-packs';
import { packedNumber, packOf, tailOf } from '@app/insights/insight-computation.repository';
import { migrationStep, useMigrationDatabase } from './support/databases';

const APP = '0190a8d2-0000-7000-8000-0000000000ab';

const key = (hex: string) => Buffer.from(hex.padEnd(32, '0'), 'hex');
const entry = (k: Buffer, no: number) => {
  const n = Buffer.alloc(4);
  n.writeInt32BE(no);
  return Buffer.concat([k.subarray(2), n]);
};

describe('insight id packs', () => {
  const db = useMigrationDatabase('tally_id_packs');
  const at = MIGRATIONS.indexOf(InsightIdPacks1764600000000);

  it('the migration packs every id by its key and unpacks it again', async () => {
    expect(at).toBeGreaterThan(0);
    for (const Migration of MIGRATIONS.slice(0, at)) await migrationStep(db, (r) => new Migration().up(r));
    const ids = [
      { kind: 'u', key: key('00aa11'), no: 0 },
      { kind: 'u', key: key('00aa22'), no: 1 },
      { kind: 'u', key: key('ffff33'), no: 70_000 },
      { kind: 's', key: key('00aa11'), no: 5 },
      { kind: 'u', key: key('0100'), no: 2 },
    ];
    for (const id of ids) {
      await db.query(`INSERT INTO insight_ids (app_id, kind, key, no) VALUES ($1, $2, $3, $4)`, [
        APP,
        id.kind,
        id.key,
        id.no,
      ]);
    }
    const before = await db.query(`SELECT kind, key, no FROM insight_ids ORDER BY kind, key`);

    await migrationStep(db, (r) => new InsightIdPacks1764600000000().up(r));
    const packs = (await db.query(
      `SELECT kind, pack, entries FROM insight_id_packs WHERE app_id = $1 ORDER BY kind, pack`,
      [APP],
    )) as { kind: string; pack: number; entries: Buffer }[];
    expect(packs).toEqual([
      { kind: 's', pack: 0x00aa, entries: entry(key('00aa11'), 5) },
      { kind: 'u', pack: 0x00aa, entries: Buffer.concat([entry(key('00aa11'), 0), entry(key('00aa22'), 1)]) },
      { kind: 'u', pack: 0x0100, entries: entry(key('0100'), 2) },
      { kind: 'u', pack: 0xffff, entries: entry(key('ffff33'), 70_000) },
    ]);
    const [storage] = (await db.query(
      `SELECT attstorage::text AS s FROM pg_attribute WHERE attrelid = 'insight_id_packs'::regclass AND attname = 'entries'`,
    )) as { s: string }[];
    expect(storage.s).toBe('m');
    expect(await db.query(`SELECT to_regclass('insight_ids') IS NULL AS gone`)).toEqual([{ gone: true }]);

    await migrationStep(db, (r) => new InsightIdPacks1764600000000().down(r));
    expect(await db.query(`SELECT kind, key, no FROM insight_ids ORDER BY kind, key`)).toEqual(before);
    await migrationStep(db, (r) => new InsightIdPacks1764600000000().up(r));
  });

  it("a lookup reads the number of the key's entry, also past a match inside another entry", async () => {
    const wanted = key('abcd0102030405060708090a0b0c0d0e');
    const tail = wanted.subarray(2);
    // An entry whose last tail bytes and number spell the first bytes of the wanted tail, so
    // that the tail first appears one byte into this pack's second entry.
    const decoy = key('abcd77');
    const tricky = Buffer.concat([
      entry(key('abcd11'), 3),
      Buffer.from([0xee]),
      tail,
      Buffer.from([0, 0, 0]),
      entry(wanted, 42),
      entry(decoy, 7),
    ]);
    expect(tricky.indexOf(tail)).toBe(19);
    const lookup = `SELECT ${packedNumber('e', 't', 'position(t IN e)')} AS no FROM (SELECT $1::bytea AS e, $2::bytea AS t) x`;
    expect(await db.query(lookup, [tricky, tail])).toEqual([{ no: 42 }]);
    expect(await db.query(lookup, [entry(wanted, 9), tail])).toEqual([{ no: 9 }]);
    expect(await db.query(lookup, [entry(decoy, 7), tail])).toEqual([{ no: null }]);
    expect(await db.query(lookup, [null, tail])).toEqual([{ no: null }]);
    expect(
      await db.query(`SELECT ${packOf('$1::bytea')} AS pack, ${tailOf('$1::bytea')} AS tail`, [wanted]),
    ).toEqual([{ pack: 0xabcd, tail }]);
  });
});
