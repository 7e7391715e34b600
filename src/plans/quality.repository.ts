import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

export interface QualityRow {
  appId: string;
  day: string;
  eventName: string;
  accepted: number;
  flagged: number;
  rejected: number;
}

export interface RuleRow {
  appId: string;
  day: string;
  eventName: string;
  field: string;
  rule: string;
  violations: number;
}

export interface QualitySummaryRow {
  event_name: string;
  accepted: string;
  flagged: string;
  rejected: string;
  /** rejected + flagged: the answer's order, most first. */
  score: string;
  rules: { field: string; rule: string; count: number }[] | null;
}

/** Where a page of the summary ended: the last row's score and event name. */
export interface QualityPosition {
  score: bigint;
  eventName: string;
}

/** The daily data-quality counts of tracking plans (`plan_quality_daily`, `plan_rule_daily`). */
@Injectable()
export class QualityRepository {
  // The primary for reads too: an instance's own counts, just added, must be in its summary.
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /** Adds counts to the day rows, in one statement. */
  async add(quality: QualityRow[], rules: RuleRow[]): Promise<void> {
    if (!quality.length && !rules.length) return;
    await this.db.query(
      `WITH q AS (
         INSERT INTO plan_quality_daily AS t (app_id, day, event_name, accepted, flagged, rejected)
         SELECT "appId", day::date, "eventName", accepted, flagged, rejected
           FROM json_to_recordset($1::json) AS r("appId" uuid, day text, "eventName" text,
                accepted bigint, flagged bigint, rejected bigint)
         ON CONFLICT (app_id, day, event_name) DO UPDATE
           SET accepted = t.accepted + EXCLUDED.accepted, flagged = t.flagged + EXCLUDED.flagged,
               rejected = t.rejected + EXCLUDED.rejected
         RETURNING 1)
       INSERT INTO plan_rule_daily AS t (app_id, day, event_name, field, rule, violations)
       SELECT "appId", day::date, "eventName", field, rule, violations
         FROM json_to_recordset($2::json) AS r("appId" uuid, day text, "eventName" text, field text,
              rule text, violations bigint)
       ON CONFLICT (app_id, day, event_name, field, rule) DO UPDATE
         SET violations = t.violations + EXCLUDED.violations`,
      [JSON.stringify(quality), JSON.stringify(rules)],
    );
  }

  /**
   * Per event name over [fromDay, toDay]: the counts and the `top` most broken rules, most
   * rejected and flagged first, then by name; at most `limit` names after `after`. The rules are
   * gathered for the page's names only, in one pass over the range's rule rows.
   */
  async summary(
    appId: string,
    fromDay: string,
    toDay: string,
    top: number,
    after: QualityPosition | null,
    limit: number,
  ): Promise<QualitySummaryRow[]> {
    return (await this.db.query(
      `WITH q AS (
         SELECT event_name, sum(accepted) AS accepted, sum(flagged) AS flagged, sum(rejected) AS rejected,
                sum(rejected) + sum(flagged) AS score
           FROM plan_quality_daily WHERE app_id = $1 AND day BETWEEN $2::date AND $3::date
          GROUP BY event_name),
       page AS (
         SELECT * FROM q
          WHERE $5::numeric IS NULL OR q.score < $5::numeric OR (q.score = $5::numeric AND q.event_name > $6)
          ORDER BY q.score DESC, q.event_name LIMIT $7),
       r AS (
         SELECT event_name, field, rule, sum(violations)::int AS count,
                row_number() OVER (PARTITION BY event_name ORDER BY sum(violations) DESC, field, rule) AS n
           FROM plan_rule_daily
          WHERE app_id = $1 AND day BETWEEN $2::date AND $3::date AND event_name IN (SELECT event_name FROM page)
          GROUP BY event_name, field, rule)
       SELECT p.event_name, p.accepted::text AS accepted, p.flagged::text AS flagged,
              p.rejected::text AS rejected, p.score::text AS score,
              json_agg(json_build_object('field', r.field, 'rule', r.rule, 'count', r.count) ORDER BY r.n)
                FILTER (WHERE r.n IS NOT NULL) AS rules
         FROM page p LEFT JOIN r ON r.event_name = p.event_name AND r.n <= $4
        GROUP BY p.event_name, p.accepted, p.flagged, p.rejected, p.score
        ORDER BY p.score DESC, p.event_name`,
      [appId, fromDay, toDay, top, after?.score.toString() ?? null, after?.eventName ?? '', limit],
    )) as QualitySummaryRow[];
  }
}
