import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `tally_ingest_in_time(oldest, max_age_ms)`: true, or an error (SQLSTATE 53T01, a transient
 * class, so the client gets 503 and retries) when the oldest receive time of an ingest
 * statement lies more than `max_age_ms` in the past. Ingest calls it as the last step of its
 * statement, after every row is written and just before the commit, so that no event commits
 * later than that after its `receivedAt`. The export horizon (EXPORT_SETTLE_MS) rests on it: a
 * window that ends before the horizon can gain no event once exported.
 */
export class IngestCommitHorizon1763900000000 implements MigrationInterface {
  name = 'IngestCommitHorizon1763900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE FUNCTION tally_ingest_in_time(oldest timestamptz, max_age_ms bigint) RETURNS boolean
      LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS $$
      BEGIN
        IF clock_timestamp() - oldest > max_age_ms * interval '1 millisecond' THEN
          RAISE EXCEPTION 'ingest statement finished % after its oldest receive time; refused so that exports stay exact',
            clock_timestamp() - oldest
            USING ERRCODE = '53T01';
        END IF;
        RETURN true;
      END
      $$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP FUNCTION IF EXISTS tally_ingest_in_time(timestamptz, bigint)`);
  }
}
