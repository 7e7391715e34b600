import { Injectable } from '@nestjs/common';
import { AppError } from '@app/common/app-error';
import { normaliseAppId } from '@app/common/ids';
import { invalidQuery } from '@app/common/query-validation.pipe';
import { addDays } from '@app/common/reads/time-params';
import { resolveRange } from '@app/common/reads/day-range';
import type { TestModeFilter } from '@app/common/reads/query-params';
import { localDateString, localDayBounds, localDayStart } from '@app/common/timezones';
import { builtInColumn, DIMENSION_CHOICES, FILTER_DIMENSIONS, PAYLOAD_PREFIX } from './dimensions';
import type { ActiveUsersQueryDto, BreakdownQueryDto } from './insights-query.dto';
import type { ActiveUsersRowDto, BreakdownRowDto } from './insights-record.dto';
import { BreakdownRow, DayBucket, InsightRepository } from './insight.repository';

const DEFAULT_BREAKDOWN_LIMIT = 50;

function modesOf(filter: TestModeFilter | undefined): boolean[] {
  if (filter === 'all') return [false, true];
  return [filter === 'true'];
}

/** Monday of the ISO week of a date. */
function weekStart(date: string): string {
  const weekday = new Date(`${date}T00:00:00Z`).getUTCDay();
  return addDays(date, -((weekday + 6) % 7));
}

function monthEnd(date: string): string {
  const [y, m] = date.split('-').map(Number);
  const last = new Date(Date.UTC(y, m, 0)).getUTCDate();
  return `${date.slice(0, 8)}${String(last).padStart(2, '0')}`;
}

/** The buckets of a range, oldest first, clipped to it; with a window, each day's trailing days. */
export function bucketsOf(fromDate: string, toDate: string, interval: string, window: number): DayBucket[] {
  const buckets: DayBucket[] = [];
  if (interval === 'total') return [{ start: fromDate, end: toDate }];
  for (let day = fromDate; day <= toDate;) {
    let end: string;
    if (interval === 'day') {
      buckets.push({ start: addDays(day, -(window - 1)), end: day });
      day = addDays(day, 1);
      continue;
    }
    end = interval === 'week' ? addDays(weekStart(day), 6) : monthEnd(day);
    if (end > toDate) end = toDate;
    buckets.push({ start: day, end });
    day = addDays(end, 1);
  }
  return buckets;
}

function toBreakdownRecord(row: BreakdownRow, perDay: boolean): BreakdownRowDto {
  const record: BreakdownRowDto = {
    value: row.value,
    events: row.events,
    users: row.users,
    sessions: row.sessions,
    floatValue:
      row.fvCount === 0
        ? null
        : {
            count: row.fvCount,
            sum: row.fvSum!,
            min: row.fvMin!,
            max: row.fvMax!,
            avg: row.fvSum! / row.fvCount,
          },
    other: row.kind === 2,
  };
  if (perDay) record.date = row.date!;
  return record;
}

/** GET /api/v1/active-users and GET /api/v1/breakdown. */
@Injectable()
export class InsightsService {
  constructor(private readonly insights: InsightRepository) {}

  async activeUsers(query: ActiveUsersQueryDto, now = Date.now()): Promise<ActiveUsersRowDto[]> {
    const appId = normaliseAppId(query.appId);
    const interval = query.interval ?? 'day';
    if (query.window !== undefined && interval !== 'day') {
      throw invalidQuery([
        { field: 'window', code: 'conflict', message: 'window can only be combined with interval=day' },
      ]);
    }
    const window = query.window ?? 1;
    const { zone } = await this.insights.appInfo(appId);
    const { fromDate, toDate } = resolveRange(query, localDateString(now, zone));
    const buckets = bucketsOf(fromDate, toDate, interval, window);
    const counts = await this.insights.activeUsers(appId, {
      eventName: query.eventName ?? '',
      modes: modesOf(query.testMode),
      buckets,
    });
    return buckets.map((b, i) => ({
      start: b.start,
      end: b.end,
      users: counts[i].users,
      // Every day of the bucket has ended in the app's zone and was computed after its end.
      final: counts[i].settled && localDayBounds(b.end, zone).end <= now,
    }));
  }

  async breakdown(query: BreakdownQueryDto, now = Date.now()): Promise<BreakdownRowDto[]> {
    const appId = normaliseAppId(query.appId);
    const { zone, dimensions } = await this.insights.appInfo(appId);
    const dimension = this.checkDimension(query.by, dimensions);
    const { fromDate, toDate } = resolveRange(query, localDateString(now, zone));
    const filters: Record<string, string> = {};
    for (const d of FILTER_DIMENSIONS) {
      const value = query[d.name as keyof BreakdownQueryDto];
      if (typeof value === 'string') filters[d.name] = value;
    }
    const perDay = (query.interval ?? 'total') === 'day';
    const q = {
      dimension,
      modes: modesOf(query.testMode),
      fromDate,
      toDate,
      perDay,
      limit: query.limit ?? DEFAULT_BREAKDOWN_LIMIT,
      eventName: query.eventName,
      filters,
    };
    // The kept daily rows answer unfiltered breakdowns; a filter is counted over the stored events.
    const rows =
      query.eventName === undefined && Object.keys(filters).length === 0
        ? await this.insights.storedBreakdown(appId, q)
        : await this.insights.eventsBreakdown(appId, q, {
            start: localDayStart(fromDate, zone),
            end: localDayBounds(toDate, zone).end,
            zone,
          });
    return rows.map((row) => toBreakdownRecord(row, perDay));
  }

  /** A built-in dimension, or `payload.<key>` for a key the app declared; else unknown_dimension. */
  private checkDimension(by: string, declared: string[]): string {
    if (builtInColumn(by) !== undefined) return by;
    if (by.startsWith(PAYLOAD_PREFIX) && declared.includes(by.slice(PAYLOAD_PREFIX.length))) return by;
    throw new AppError(
      'unknown_dimension',
      `by must be ${DIMENSION_CHOICES} for a ` + `declared key; got "${by.slice(0, 200)}"`,
      {
        errors: [
          { field: 'by', code: 'unknown_dimension', message: `unknown dimension "${by.slice(0, 200)}"` },
        ],
      },
    );
  }
}
