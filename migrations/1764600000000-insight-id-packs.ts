import { MigrationInterface, QueryRunner } from 'typeorm';
import { distributeByApp, hasCitus, sequentialCitusTransaction } from './citus';

/**
 * The dense numbers of insights move from a row per id (`insight_ids`: about 145 bytes an id with
 * its primary-key entry) into packs of 18 bytes an id: `insight_id_packs` holds, per (app, kind,
 * pack), the ids whose 16-byte key starts with the two bytes `pack` names, each as the key's
 * other 14 bytes followed by its number (int4, big-endian), one after the other in the order
 * they were numbered. Nothing is lost: a key is the pack's two bytes and the entry's fourteen.
 *
 * The packs are kept inline (STORAGE MAIN: a key is a hash, which does not compress, and a pack
 * of a few hundred ids stays in its row rather than in TOAST chunks).
 *
 * The conversion is written out here rather than imported, so that this migration stays what it
 * was whatever the service's code becomes.
 */
export class InsightIdPacks1764600000000 implements MigrationInterface {
  name = 'InsightIdPacks1764600000000';

  async up(q: QueryRunner): Promise<void> {
    const citus = await hasCitus(q);
    if (citus) await sequentialCitusTransaction(q);
    await q.query(`
      CREATE TABLE insight_id_packs (
        app_id   uuid NOT NULL,
        kind     "char" NOT NULL,
        pack     integer NOT NULL,
        entries  bytea NOT NULL,
        PRIMARY KEY (app_id, kind, pack)
      )`);
    await q.query(`ALTER TABLE insight_id_packs ALTER COLUMN entries SET STORAGE MAIN`);
    if (citus) await distributeByApp(q, ['insight_id_packs']);
    await q.query(`
      INSERT INTO insight_id_packs (app_id, kind, pack, entries)
      SELECT app_id, kind, (get_byte(key, 0) << 8) | get_byte(key, 1),
             string_agg(substring(key FROM 3 FOR 14) || int4send(no), ''::bytea ORDER BY no)
        FROM insight_ids
       GROUP BY 1, 2, 3`);
    await q.query(`DROP TABLE insight_ids`);
  }

  async down(q: QueryRunner): Promise<void> {
    const citus = await hasCitus(q);
    if (citus) await sequentialCitusTransaction(q);
    await q.query(`
      CREATE TABLE insight_ids (
        app_id  uuid NOT NULL,
        kind    "char" NOT NULL,
        key     bytea NOT NULL,
        no      integer NOT NULL,
        PRIMARY KEY (app_id, kind, key)
      )`);
    if (citus) await distributeByApp(q, ['insight_ids']);
    await q.query(`
      INSERT INTO insight_ids (app_id, kind, key, no)
      SELECT p.app_id, p.kind,
             decode(lpad(to_hex(p.pack), 4, '0'), 'hex') || substring(p.entries FROM i * 18 + 1 FOR 14),
             (get_byte(p.entries, i * 18 + 14) << 24) | (get_byte(p.entries, i * 18 + 15) << 16)
               | (get_byte(p.entries, i * 18 + 16) << 8) | get_byte(p.entries, i * 18 + 17)
        FROM insight_id_packs p, generate_series(0, length(p.entries) / 18 - 1) AS i`);
    await q.query(`DROP TABLE insight_id_packs`);
  }
}
