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
  rules: { field: string; rule: string; count: number }[] | null;
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

  /** Per event name over [fromDay, toDay]: the counts and the `top` most broken rules. */
  async summary(appId: string, fromDay: string, toDay: string, top: number): Promise<QualitySummaryRow[]> {
    return (await this.db.query(
      `WITH q AS (
         SELECT event_name, sum(accepted)::text AS accepted, sum(flagged)::text AS flagged,
                sum(rejected)::text AS rejected
           FROM plan_quality_daily WHERE app_id = $1 AND day BETWEEN $2::date AND $3::date
          GROUP BY event_name),
       r AS (
         SELECT event_name, field, rule, sum(violations)::int AS count,
                row_number() OVER (PARTITION BY event_name ORDER BY sum(violations) DESC, field, rule) AS n
           FROM plan_rule_daily WHERE app_id = $1 AND day BETWEEN $2::date AND $3::date
          GROUP BY event_name, field, rule)
       SELECT q.*, (SELECT json_agg(json_build_object('field', field, 'rule', rule, 'count', count) ORDER BY n)
                      FROM r WHERE r.event_name = q.event_name AND r.n <= $4) AS rules
         FROM q ORDER BY q.rejected::bigint + q.flagged::bigint DESC, q.event_name`,
      [appId, fromDay, toDay, top],
    )) as QualitySummaryRow[];
  }
}
