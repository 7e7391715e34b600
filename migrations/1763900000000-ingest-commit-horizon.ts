import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `tally_ingest_in_time(budget_ms)`: true, or an error (SQLSTATE 53T01, a transient class, so
 * the client gets 503 and retries) when the running statement has taken longer than
 * `budget_ms`. Ingest passes what is left, when it sends the statement, of the time an event may
 * take from its `receivedAt` to its commit, and calls it as the last step of the statement,
 * after every row is written and just before the commit. Both clocks it compares are the
 * database's (the statement's start and now); the part before is measured by the service on its
 * own clock, so a skew between the two hosts does not matter. The export horizon
 * (EXPORT_SETTLE_MS) rests on it: a window that ends before the horizon gains no event once
 * exported.
 */
export class IngestCommitHorizon1763900000000 implements MigrationInterface {
  name = 'IngestCommitHorizon1763900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE FUNCTION tally_ingest_in_time(budget_ms bigint) RETURNS boolean
      LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS $$
      BEGIN
        IF clock_timestamp() - statement_timestamp() > budget_ms * interval '1 millisecond' THEN
          RAISE EXCEPTION 'ingest statement took % of a budget of % ms; refused so that exports stay exact',
            clock_timestamp() - statement_timestamp(), budget_ms
            USING ERRCODE = '53T01';
        END IF;
        RETURN true;
      END
      $$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP FUNCTION IF EXISTS tally_ingest_in_time(bigint)`);
  }
}
