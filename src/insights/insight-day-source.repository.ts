import { Injectable } from '@nestjs/common';
import { EVENT_COLUMN as c } from '@app/common/events/event-fields';
import type { InsightDay, Sql } from './insight-computation.repository';
import { type DayParts, withoutParallelWorkers } from './insight-day.repository';

/**
 * The version of what a day's rows hold for given inputs: a change to the day's statement or to
 * how its rows are written that changes them for the same events takes it up by one, so that
 * every stored day is computed again rather than kept (see InsightDaySourceRepository.source). 2: the
 * float-value sums are stored exact.
 */
const COMPUTATION_VERSION = 2;

/**
 * What a day's rows were computed from, against the day now (InsightDaySourceRepository.source):
 * `same`, they are what computing it would write; `grown`, the day only gained events since, with
 * ids past the stored ones, and can take them alone (day-increment.ts tells whether the rows
 * allow it).
 */
export interface DaySource {
  /** The digest of the day's settings: version, window and zone, dimensions, value bound. */
  settings: Buffer;
  /** The event names of the day's rollups, sorted: the per-name user sets follow them. */
  names: string[];
  same: boolean;
  grown: boolean;
  /** With `grown`: the largest id the rows hold, the names they followed, the events added since. */
  maxId: string;
  storedNames: string[];
  newEvents: number;
}

/**
 * What each computed day's rows were computed from (`insight_day_sources`), so that a day is
 * computed again only when it changed, and a day that only gained events takes those alone.
 */
@Injectable()
export class InsightDaySourceRepository {
  /**
   * What the day's rows were computed from, against the day now. The settings (the computation's
   * version, the day's window and zone, the declared dimensions, the value bound) as a digest, the
   * event names of the day's rollups, and the events as their parts (DayParts). Events are never
   * changed in place and an id is never given twice, so a day whose events changed since (late
   * events, an erasure) has other ids: the parts differ but for a chance of about 2⁻⁶⁴ that the
   * hashes of the ids gone and come cancel out exactly. The rows are `same` when all of it is;
   * `grown` when only events with ids past the rows' largest have come: the parts of the events
   * up to it are the rows', and the names are the rows' or more; and they are no more than the
   * rows' events, as a day that more than doubled costs about as much to compute whole, and more
   * often has a value the bound cannot place (which would read the new events twice). The parts
   * stored are those of the events the day's statement read, in its own snapshot (writeSource,
   * addSource), so an event committed after it shows at the next comparison.
   */
  async source(
    runner: Sql,
    appId: string,
    day: InsightDay,
    declared: readonly string[],
    maxValues: number,
  ): Promise<DaySource> {
    const settings = JSON.stringify([COMPUTATION_VERSION, day.zone, day.start, day.end, maxValues, declared]);
    const rollups = day.rezone ? 'rollups_rezone' : 'rollups';
    // A scan of one day: PostgreSQL would plan a parallel worker for it, whose start costs more
    // than it saves (about 14 ms a day of 66,667 events alone, 32 ms with a worker).
    const rows = (await withoutParallelWorkers(runner, () =>
      runner.query(
        `WITH s AS (
         SELECT * FROM insight_day_sources WHERE app_id = $1 AND rezone = $3 AND day = $2::date
       ), now AS (
         -- The events past the stored ones are few, and counted apart: the stored ones are the rest.
         SELECT count(*) AS events, coalesce(sum(id), 0) AS id_sum, coalesce(sum(h), 0) AS hash_sum,
                count(*) FILTER (WHERE id > m) AS new_events, coalesce(sum(id) FILTER (WHERE id > m), 0) AS new_id_sum,
                coalesce(sum(h) FILTER (WHERE id > m), 0) AS new_hash_sum
           FROM (SELECT e.${c.id} AS id, hashint8extended(e.${c.id}, 0) AS h, (SELECT max_id FROM s) AS m
                   FROM events e
                  WHERE e.${c.appId} = $1 AND e.${c.timestamp} >= $5 AND e.${c.timestamp} < $6) x
       ), d AS (
         SELECT sha256(convert_to($4::text, 'UTF8')) AS settings,
                (SELECT coalesce(array_agg(DISTINCT event_name ORDER BY event_name), '{}')
                   FROM ${rollups} WHERE app_id = $1 AND day = $2::date AND event_name <> '') AS names
       )
       SELECT d.settings, d.names,
              coalesce(s.source = d.settings AND s.names = d.names AND s.events = now.events
                       AND s.id_sum = now.id_sum AND s.hash_sum = now.hash_sum, false) AS same,
              coalesce(s.source = d.settings AND s.names <@ d.names AND now.events > s.events
                       AND now.new_events <= s.events
                       AND s.events = now.events - now.new_events AND s.id_sum = now.id_sum - now.new_id_sum
                       AND s.hash_sum = now.hash_sum - now.new_hash_sum, false) AS grown,
              s.max_id::text AS "maxId", s.names AS "storedNames", (now.events - s.events)::int AS "newEvents"
         FROM d CROSS JOIN now LEFT JOIN s ON true`,
        [appId, day.day, day.rezone, settings, new Date(day.start), new Date(day.end)],
      ),
    )) as DaySource[];
    return rows[0];
  }

  /** Stores what the day's rows were just computed from (see source). */
  async writeSource(
    runner: Sql,
    appId: string,
    day: InsightDay,
    source: DaySource,
    parts: DayParts,
  ): Promise<void> {
    await runner.query(
      `INSERT INTO insight_day_sources AS s (app_id, rezone, day, source, names, events, id_sum, hash_sum, max_id)
       VALUES ($1, $2, $3::date, $4, $5, $6, $7, $8, $9)
       ON CONFLICT (app_id, rezone, day) DO UPDATE
          SET source = EXCLUDED.source, names = EXCLUDED.names, events = EXCLUDED.events,
              id_sum = EXCLUDED.id_sum, hash_sum = EXCLUDED.hash_sum, max_id = EXCLUDED.max_id`,
      [appId, day.rezone, day.day, source.settings, source.names, ...partsOf(parts)],
    );
  }

  /** Adds the parts of the events just added to the day's rows to what they were computed from. */
  async addSource(
    runner: Sql,
    appId: string,
    day: InsightDay,
    names: string[],
    parts: DayParts,
  ): Promise<void> {
    await runner.query(
      `UPDATE insight_day_sources
          SET names = $4, events = events + $5, id_sum = id_sum + $6, hash_sum = hash_sum + $7,
              max_id = greatest(max_id, $8)
        WHERE app_id = $1 AND rezone = $2 AND day = $3::date`,
      [appId, day.rezone, day.day, names, ...partsOf(parts)],
    );
  }
}

/** DayParts as the parameters events, id_sum, hash_sum, max_id. */
function partsOf(parts: DayParts): string[] {
  return [parts.events, parts.idSum, parts.hashSum, parts.maxId];
}
