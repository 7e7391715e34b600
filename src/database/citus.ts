import type { DataSource } from 'typeorm';

/**
 * Whether the database is a Citus coordinator (the `citus` extension is installed in it), found
 * once at boot. Code whose statements would otherwise span several workers asks it: ingest then
 * commits the batches of one app per statement, so that each commit happens on one worker without
 * two-phase commit, and the partition upkeep reaches the workers' shards.
 */
export class CitusCluster {
  constructor(readonly enabled: boolean) {}

  static async detect(db: DataSource): Promise<CitusCluster> {
    const [row] = (await db.query(
      `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS citus`,
    )) as { citus: boolean }[];
    return new CitusCluster(row.citus);
  }
}
