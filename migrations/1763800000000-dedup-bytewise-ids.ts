import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Compares eventIds in the dedup index byte by byte. Dedup only needs equality, and the "C"
 * collation makes every comparison a memcmp instead of a locale-aware one, on the one index
 * every ingested event with an eventId passes through. Rebuilds the primary key.
 */
export class DedupBytewiseIds1763800000000 implements MigrationInterface {
  name = 'DedupBytewiseIds1763800000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE event_dedup ALTER COLUMN event_id TYPE text COLLATE "C"`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE event_dedup ALTER COLUMN event_id TYPE text COLLATE "default"`);
  }
}
