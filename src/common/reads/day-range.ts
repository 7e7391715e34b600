import { invalidQuery } from '@app/common/query-validation.pipe';
import { addDays, daySpan } from './time-params';

const DEFAULT_RANGE_DAYS = 30;
const MAX_SPAN_DAYS = 366;

interface RangeQuery {
  fromDate?: string;
  toDate?: string;
  range?: string;
}

/**
 * The day range of the rollup-shaped reads (rollups, active users, breakdowns), in the app's
 * local days: `fromDate`/`toDate`, or `range=<n>d` ending today, or the last 30 days; at most
 * 366 days.
 */
export function resolveRange(query: RangeQuery, today: string): { fromDate: string; toDate: string } {
  if (query.range !== undefined && (query.fromDate !== undefined || query.toDate !== undefined)) {
    const field = query.fromDate !== undefined ? 'fromDate' : 'toDate';
    throw invalidQuery([
      { field: 'range', code: 'conflict', message: `range cannot be combined with ${field}` },
    ]);
  }
  let fromDate: string;
  let toDate: string;
  if (query.range !== undefined) {
    const days = Number(query.range.slice(0, -1));
    if (days > MAX_SPAN_DAYS) {
      throw invalidQuery([
        { field: 'range', code: 'out_of_range', message: `range must be 1d to ${MAX_SPAN_DAYS}d` },
      ]);
    }
    toDate = today;
    fromDate = addDays(today, -(days - 1));
  } else {
    toDate = query.toDate ?? today;
    fromDate = query.fromDate ?? addDays(toDate, -(DEFAULT_RANGE_DAYS - 1));
  }
  if (fromDate > toDate) {
    throw invalidQuery([
      { field: 'fromDate', code: 'invalid_range', message: 'fromDate must not be after toDate' },
    ]);
  }
  if (daySpan(fromDate, toDate) > MAX_SPAN_DAYS) {
    throw invalidQuery([
      {
        field: 'fromDate',
        code: 'span_too_long',
        message: `the range from fromDate to toDate spans more than ${MAX_SPAN_DAYS} days`,
      },
    ]);
  }
  return { fromDate, toDate };
}
