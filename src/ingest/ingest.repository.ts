import { Injectable, OnModuleInit, Optional } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import type { AcceptedEvent } from './ingest.types';
import { dirtyMarkArrays } from './dirty-marks';
import { columnArrays, INGEST_COLUMNS, SQL_TYPE, unnestArrays } from './ingest-columns';
import { withDriverClient } from '@app/database/driver-client';
import { CitusCluster } from '@app/database/citus';
import { createHash } from 'node:crypto';
import { EVENT_COLUMN as c } from '@app/common/events/event-fields';

// One statement does the whole write of one or more batches, so it is one transaction and one
// round trip. Each input row carries its own app and receive time, because the writer puts the
// batches of several concurrent requests into one statement (see IngestWriter).
//  - `fresh` claims each eventId in event_dedup. A row already there is a duplicate, unless it
//    is older than the dedup window (the hourly expiry has not reached it yet), in which case it
//    is refreshed and counts as new (compared as a difference of timestamps, whose operators are
//    immutable, as Citus requires of an ON CONFLICT condition). Ids are claimed in sorted order so that two statements
//    sharing ids cannot deadlock; a concurrent statement with the same id waits on the unique
//    index and then sees the conflict, so exactly one copy is stored.
//  - `stored` inserts the events with no eventId or a freshly claimed one.
//  - `dirty` marks each (app, local day) that received events, for the rollup task: the day in
//    the app's time zone, named before the statement (the three parameters after the dedup
//    window, see dirtyMarkArrays). It runs last, after every row is written, and checks that the
//    statement took at most the last parameter's ms, what was left of the oldest batch's commit
//    budget when it was sent (tally_ingest_in_time raises otherwise), so that no event commits
//    later than that after its receivedAt: the export horizon rests on it (docs/decisions.md).
//  - The result lists the input positions (1-based) whose eventId was a duplicate.
// The input columns come from INGEST_COLUMNS (the stored event's fields, common/events), whose arrays arrive first, in PostgreSQL's binary
// format (see columnArrays); then the dedup window (text), the dirty marks and the budget.

/** The statement's parameter `k` after the columns' arrays (1: the dedup window). */
const after = (k: number) => `$${INGEST_COLUMNS.length + k}`;
const columnParams = unnestArrays(INGEST_COLUMNS);
const inputNames = INGEST_COLUMNS.map((c) => c.name).join(', ');
const storedNames = inputNames;
const storedValues = INGEST_COLUMNS.map((c) => `i.${c.name}`).join(', ');

const WRITE_ROWS = `
WITH input AS (
  SELECT * FROM unnest(${columnParams}) WITH ORDINALITY AS t(${inputNames}, n)
),
fresh AS (
  INSERT INTO event_dedup AS d (app_id, event_id, seen_at)
  SELECT ${c.appId}, ${c.eventId}, ${c.receivedAt}
    FROM input WHERE event_id IS NOT NULL ORDER BY app_id, event_id
  ON CONFLICT (app_id, event_id) DO UPDATE SET seen_at = EXCLUDED.seen_at
    WHERE EXCLUDED.seen_at - d.seen_at > ${after(1)}::bigint * interval '1 millisecond'
  RETURNING d.app_id, d.event_id
),
stored AS (
  INSERT INTO events (${storedNames})
  SELECT ${storedValues}
    FROM input i
   WHERE i.event_id IS NULL
      OR EXISTS (SELECT 1 FROM fresh f WHERE f.app_id = i.app_id AND f.event_id = i.event_id)
  RETURNING app_id, ts
),
dirty AS (
  INSERT INTO rollup_dirty (app_id, day, timezone)
  SELECT m.app_id, m.day::date, m.zone FROM unnest(${after(2)}::uuid[], ${after(3)}::text[], ${after(4)}::text[]) AS m(app_id, day, zone)
   WHERE EXISTS (SELECT 1 FROM stored s WHERE s.app_id = m.app_id)
     AND tally_ingest_in_time(${after(5)}::bigint)
)`;
const DUPLICATE_POSITIONS = `
SELECT i.n::int AS n FROM input i
 WHERE i.event_id IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM fresh f WHERE f.app_id = i.app_id AND f.event_id = i.event_id)`;

export const INSERT_ROWS = WRITE_ROWS + DUPLICATE_POSITIONS;

/** The parameter of one input column's array, cast as the statement casts it. */
function columnParam(name: string): string {
  const k = INGEST_COLUMNS.findIndex((c) => c.name === name);
  if (k < 0) throw new Error(`no ingest column ${name}`);
  return `$${k + 1}::${SQL_TYPE[INGEST_COLUMNS[k].type]}[]`;
}

/**
 * On Citus, the same write for the batches of one app is a PL/pgSQL function distributed by its
 * last argument, the app (co-located with `events`): the coordinator hands each call to the
 * worker that holds the app, which runs it on its own shards and commits there, without two-phase
 * commit. The single statement above would not do: Citus runs each of its data-modifying steps
 * as a separate distributed step and sends their intermediate results to every node, which makes
 * each commit a two-phase one. Here each step hands the next only a PL/pgSQL array, so every
 * statement stays on the worker. Same rules: claim the eventIds, insert the fresh and unnamed
 * events, mark the days and check the commit budget when anything was stored, and return the
 * positions of the duplicates. Its name carries a digest of its text, so that instances of two
 * versions can run side by side.
 */
const FUNCTION_ARGS = [
  ...INGEST_COLUMNS.map((c) => `${SQL_TYPE[c.type]}[]`),
  'bigint',
  'uuid[]',
  'text[]',
  'text[]',
  'bigint',
  'uuid',
];
const FUNCTION_BODY = `
DECLARE
  fresh text[];
  stored bigint;
  duplicates int[];
BEGIN
  WITH claimed AS (
    INSERT INTO event_dedup AS d (app_id, event_id, seen_at)
    SELECT ${c.appId}, ${c.eventId}, ${c.receivedAt}
      FROM unnest(${columnParam(c.appId)}, ${columnParam(c.eventId)}, ${columnParam(c.receivedAt)})
           AS t(${c.appId}, ${c.eventId}, ${c.receivedAt})
     WHERE event_id IS NOT NULL ORDER BY event_id
    ON CONFLICT (app_id, event_id) DO UPDATE SET seen_at = EXCLUDED.seen_at
      WHERE EXCLUDED.seen_at - d.seen_at > ${after(1)}::bigint * interval '1 millisecond'
    RETURNING d.event_id)
  SELECT coalesce(array_agg(event_id), '{}') INTO fresh FROM claimed;

  WITH written AS (
    INSERT INTO events (${storedNames})
    SELECT ${storedValues}
      FROM unnest(${columnParams}) AS i(${inputNames})
     WHERE i.event_id IS NULL OR i.event_id = ANY (fresh)
    RETURNING 1)
  SELECT count(*) INTO stored FROM written;

  IF stored > 0 THEN
    INSERT INTO rollup_dirty (app_id, day, timezone)
    SELECT m.app_id, m.day::date, m.zone
      FROM unnest(${after(2)}::uuid[], ${after(3)}::text[], ${after(4)}::text[]) AS m(app_id, day, zone);
    PERFORM tally_ingest_in_time(${after(5)}::bigint);
  END IF;

  SELECT coalesce(array_agg(t.n::int ORDER BY t.n), '{}') INTO duplicates
    FROM unnest(${columnParam('event_id')}) WITH ORDINALITY AS t(event_id, n)
   WHERE t.event_id IS NOT NULL AND NOT (t.event_id = ANY (fresh));
  RETURN duplicates;
END`;
const FUNCTION_NAME = `tally_ingest_app_${createHash('sha256')
  .update(FUNCTION_ARGS.join(',') + FUNCTION_BODY)
  .digest('hex')
  .slice(0, 12)}`;
const FUNCTION_SIGNATURE = `${FUNCTION_NAME}(${FUNCTION_ARGS.join(', ')})`;
const CALL_APP_FUNCTION = `SELECT ${FUNCTION_NAME}(${FUNCTION_ARGS.map((_, k) => `$${k + 1}`).join(', ')}) AS d`;

/**
 * Which events of `batches` go to the database, in order. An eventId that several batches of one
 * app share is sent once, for the first: one statement cannot claim the same dedup record twice.
 * The later copies are recorded in `duplicates` at once.
 */
function selectRows(batches: WriteBatch[], duplicates: number[][]) {
  const events: AcceptedEvent[] = [];
  const batchOf: number[] = [];
  const positionOf: number[] = [];
  // Only batches of the same app can share an eventId; an app alone in the group needs no set.
  const perApp = new Map<string, number>();
  for (const { appId } of batches) perApp.set(appId, (perApp.get(appId) ?? 0) + 1);
  const claimed = new Map<string, Set<string>>();
  for (let b = 0; b < batches.length; b++) {
    const { appId, events: batchEvents } = batches[b];
    let ids: Set<string> | undefined;
    if (perApp.get(appId)! > 1) {
      ids = claimed.get(appId);
      if (!ids) claimed.set(appId, (ids = new Set()));
    }
    for (let position = 0; position < batchEvents.length; position++) {
      const event = batchEvents[position];
      if (ids && event.eventId !== null) {
        if (ids.has(event.eventId)) {
          duplicates[b].push(position);
          continue;
        }
        ids.add(event.eventId);
      }
      events.push(event);
      batchOf.push(b);
      positionOf.push(position);
    }
  }
  return { events, batchOf, positionOf };
}

// Prepared once per connection, so PostgreSQL plans this large statement once rather than on
// every batch. Bump the suffix whenever the statement's text changes, INGEST_COLUMNS included.
const STATEMENT_NAME = 'tally_ingest_rows_v8';

interface PgClient {
  query(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: { n: number }[] }>;
}

interface PgFunctionClient {
  query(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: { d: number[] }[] }>;
}

/** The accepted events of one request, for one app. */
export interface WriteBatch {
  appId: string;
  /** Epoch ms: the events' receivedAt and the dedup record's seen_at. */
  receivedAt: number;
  /** Unique eventIds within the batch (the service drops repeats first). */
  events: AcceptedEvent[];
  /** The app's IANA time zone, from the key cache: it names the local day of the dirty marks (default UTC). */
  timezone?: string;
}

/** Writes accepted events. The only code that touches the events and dedup tables on ingest. */
@Injectable()
export class IngestRepository implements OnModuleInit {
  private readonly onCitus: boolean;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @Optional() citus?: CitusCluster,
  ) {
    this.onCitus = citus?.enabled ?? false;
  }

  /** On Citus, makes sure this version's ingest function exists and is distributed by app. */
  async onModuleInit(): Promise<void> {
    if (!this.onCitus) return;
    await this.db.transaction(async (tx) => {
      // Instances starting together create it once.
      await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 7310200))`, [FUNCTION_NAME]);
      const [{ ready }] = (await tx.query(
        `SELECT EXISTS (SELECT 1 FROM pg_dist_object o JOIN pg_proc p ON p.oid = o.objid
                         WHERE o.classid = 'pg_proc'::regclass AND p.proname = $1) AS ready`,
        [FUNCTION_NAME],
      )) as { ready: boolean }[];
      if (ready) return;
      await tx.query(`SET LOCAL citus.multi_shard_modify_mode TO 'sequential'`);
      await tx.query(
        `CREATE OR REPLACE FUNCTION ${FUNCTION_SIGNATURE} RETURNS int[] LANGUAGE plpgsql VOLATILE AS $body$${FUNCTION_BODY}$body$`,
      );
      await tx.query(`SELECT create_distributed_function($1, $2, colocate_with => 'events')`, [
        FUNCTION_SIGNATURE,
        `$${FUNCTION_ARGS.length}`,
      ]);
    });
  }

  /**
   * Stores the events of `batches` atomically, in one statement, skipping eventIds of the same
   * app already seen within the last `dedupWindowMs` before each batch's receive time. An
   * eventId that two batches share is stored once, for the first. Returns, for each batch, the
   * positions in its `events` that were duplicates. Refuses (SQLSTATE 53T01, nothing stored)
   * when the statement ends more than `commitWithinMs` after the oldest batch's receive time
   * (the wait before it on this clock, the statement itself on the database's).
   */
  async insertBatches(
    batches: WriteBatch[],
    dedupWindowMs: number,
    commitWithinMs: number,
  ): Promise<number[][]> {
    // The driver's client is used directly for its named (prepared) statements; TypeORM's
    // query() sends unnamed ones only.
    return withDriverClient(this.db, (client) =>
      this.insertWith(client as PgClient, batches, dedupWindowMs, commitWithinMs),
    );
  }

  /**
   * As `insertBatches`, inside the caller's transaction (the quarantine replay). The commit comes
   * after the caller's remaining statements, which the horizon's other half covers.
   */
  async insertBatchesIn(
    manager: EntityManager,
    batches: WriteBatch[],
    dedupWindowMs: number,
    commitWithinMs: number,
  ): Promise<number[][]> {
    const client = (await manager.queryRunner!.connect()) as PgClient;
    return this.insertWith(client, batches, dedupWindowMs, commitWithinMs);
  }

  private async insertWith(
    client: PgClient,
    batches: WriteBatch[],
    dedupWindowMs: number,
    commitWithinMs: number,
  ): Promise<number[][]> {
    const duplicates: number[][] = batches.map(() => []);
    const { events, batchOf, positionOf } = selectRows(batches, duplicates);
    if (events.length === 0) return duplicates;

    // What is left of the commit budget of the oldest batch; the statement must end within it.
    const oldest = Math.min(...batches.map((b) => b.receivedAt));
    const budgetMs = commitWithinMs - (Date.now() - oldest);
    const values: unknown[] = [
      ...columnArrays({ batches, events, batchOf }),
      dedupWindowMs,
      ...dirtyMarkArrays(batches),
      budgetMs,
    ];
    let positions: number[];
    if (this.onCitus && batches.every((b) => b.appId === batches[0].appId)) {
      const call = {
        name: `${FUNCTION_NAME}_call`,
        text: CALL_APP_FUNCTION,
        values: [...values, batches[0].appId],
      };
      positions = (await (client as unknown as PgFunctionClient).query(call)).rows[0].d;
    } else {
      const result = await client.query({ name: STATEMENT_NAME, text: INSERT_ROWS, values });
      positions = result.rows.map((r) => r.n);
    }
    for (const n of positions) duplicates[batchOf[n - 1]].push(positionOf[n - 1]);
    return duplicates;
  }
}
