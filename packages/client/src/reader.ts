import { TallyError } from './errors.js';
import type { ActiveUsersRow, BreakdownRow, Deletion, EventRecord, RollupRecord } from './types.js';

export interface TallyReaderOptions {
  /** Base URL of the deployment. */
  endpoint: string;
  /** A REST API key, `tly_api_…`, with `events:read` and/or `rollups:read`. */
  apiKey: string;
  /** Events per page. Default 500 (the server's maximum). */
  pageSize?: number;
  /** Retries of a 429 or 503 after its Retry-After (or 1 s). Default 5. */
  maxRetries?: number;
  fetch?: typeof fetch;
  sleep?: (ms: number) => Promise<void>;
}

export type TestModeFilter = boolean | 'all';

export interface EventsQuery {
  appId: string;
  eventName?: string;
  anonymousUserId?: string;
  sessionId?: string;
  /** Inclusive; epoch ms, a Date or an ISO-8601 string. */
  from?: number | string | Date;
  /** Exclusive; epoch ms, a Date or an ISO-8601 string. */
  to?: number | string | Date;
  testMode?: TestModeFilter;
}

export interface RollupsQuery {
  appId: string;
  /** `7d`: the last 7 days including today. Not combinable with fromDate/toDate. */
  range?: string;
  /** First day, YYYY-MM-DD, in the app's time zone. */
  fromDate?: string;
  /** Last day, YYYY-MM-DD, in the app's time zone. */
  toDate?: string;
  eventName?: string;
  testMode?: TestModeFilter;
}

export interface ActiveUsersQuery {
  appId: string;
  /** `30d`: the last 30 days including today. Not combinable with fromDate/toDate. */
  range?: string;
  /** First day, YYYY-MM-DD, in the app's time zone. */
  fromDate?: string;
  /** Last day, YYYY-MM-DD, in the app's time zone. */
  toDate?: string;
  /** `day` (default), `week` (ISO weeks), `month` or `total`. */
  interval?: 'day' | 'week' | 'month' | 'total';
  /** 1–90, only with interval `day`: each day counts the users of the `window` days ending that day. */
  window?: number;
  /** Only users who sent this event. */
  eventName?: string;
  testMode?: TestModeFilter;
}

export interface BreakdownQuery {
  appId: string;
  /** eventName, platform, appVersion, osVersion, deviceModel, locale, or `payload.<key>` for a declared key. */
  by: string;
  range?: string;
  fromDate?: string;
  toDate?: string;
  /** `total` (default) or `day`. */
  interval?: 'total' | 'day';
  /** 1–1000, default 50: the values with the most events; the rest is one row with `other: true`. */
  limit?: number;
  eventName?: string;
  testMode?: TestModeFilter;
  platform?: string;
  appVersion?: string;
  osVersion?: string;
  deviceModel?: string;
  locale?: string;
}

export interface ExportQuery {
  appId: string;
  /** Start of the window on the receive time, inclusive; epoch ms, a Date or an ISO-8601 string. */
  from: number | string | Date;
  /** End of the window, exclusive. Default: the server's export horizon (now − EXPORT_SETTLE_MS). */
  to?: number | string | Date;
  /** `ndjson` (default): records. `parquet`: the bytes of one Parquet file. */
  format?: 'ndjson' | 'parquet';
  testMode?: TestModeFilter;
  /** Resume point, `<receivedAt>:<id>` of the last record already handled. */
  after?: string;
}

const NEXT_LINK = /<([^>]*)>\s*;\s*rel="?next"?/i;

/** Reads events (following the pages) and rollups with a scoped API key. */
export class TallyReader {
  private readonly base: string;
  private readonly fetchImpl: typeof fetch;
  private readonly pageSize: number;
  private readonly maxRetries: number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly authorization: string;

  constructor(options: TallyReaderOptions) {
    if (!options.endpoint) throw new TypeError('TallyReader: endpoint is required');
    if (!options.apiKey) throw new TypeError('TallyReader: apiKey is required');
    this.base = options.endpoint.replace(/\/+$/, '');
    this.fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.pageSize = options.pageSize ?? 500;
    this.maxRetries = options.maxRetries ?? 5;
    this.sleep = options.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
    this.authorization = `Bearer ${options.apiKey}`;
  }

  /** Every matching event, newest first, page after page. */
  async *events(query: EventsQuery): AsyncGenerator<EventRecord, void, undefined> {
    let url: string | null = this.url('/api/v1/events', {
      appId: query.appId,
      limit: this.pageSize,
      eventName: query.eventName,
      anonymousUserId: query.anonymousUserId,
      sessionId: query.sessionId,
      from: time(query.from),
      to: time(query.to),
      testMode: query.testMode,
    });
    while (url) {
      const res = await this.send(url);
      const rows = (await res.json()) as EventRecord[];
      for (const row of rows) yield row;
      url = this.next(res, url);
    }
  }

  /**
   * Daily rollups: the app-wide total row first for each day, then one row per eventName. Follows
   * the pages (the server answers at most ROLLUPS_MAX_ROWS rows at a time) and returns them all.
   */
  async rollups(query: RollupsQuery): Promise<RollupRecord[]> {
    let url: string | null = this.url('/api/v1/rollups', {
      appId: query.appId,
      range: query.range,
      fromDate: query.fromDate,
      toDate: query.toDate,
      eventName: query.eventName,
      testMode: query.testMode,
    });
    const rows: RollupRecord[] = [];
    while (url) {
      const res = await this.send(url);
      for (const row of (await res.json()) as RollupRecord[]) rows.push(row);
      url = this.next(res, url);
    }
    return rows;
  }

  /**
   * Exact distinct users per bucket of the app's local days, oldest first, empty buckets included
   * (an API key with `rollups:read`).
   */
  async activeUsers(query: ActiveUsersQuery): Promise<ActiveUsersRow[]> {
    const url = this.url('/api/v1/active-users', {
      appId: query.appId,
      range: query.range,
      fromDate: query.fromDate,
      toDate: query.toDate,
      interval: query.interval,
      window: query.window,
      eventName: query.eventName,
      testMode: query.testMode,
    });
    return (await (await this.send(url)).json()) as ActiveUsersRow[];
  }

  /**
   * Events, users and sessions by the values of one dimension: the top `limit` values (per day
   * with interval `day`), the row of events without the field (`value: null`) and one `other` row.
   */
  async breakdown(query: BreakdownQuery): Promise<BreakdownRow[]> {
    const url = this.url('/api/v1/breakdown', {
      appId: query.appId,
      by: query.by,
      range: query.range,
      fromDate: query.fromDate,
      toDate: query.toDate,
      interval: query.interval,
      limit: query.limit,
      eventName: query.eventName,
      testMode: query.testMode,
      platform: query.platform,
      appVersion: query.appVersion,
      osVersion: query.osVersion,
      deviceModel: query.deviceModel,
      locale: query.locale,
    });
    return (await (await this.send(url)).json()) as BreakdownRow[];
  }

  /**
   * Erases users of an app (an API key with `privacy:write`). Answers at once with the pending
   * deletion; poll `deletion(id)` until its status is `done`. `suppress` (default true) also
   * refuses the users' future events.
   */
  async deleteUsers(
    appId: string,
    anonymousUserIds: string[],
    options: { suppress?: boolean } = {},
  ): Promise<Deletion> {
    const body = JSON.stringify({ appId, anonymousUserIds, suppress: options.suppress ?? true });
    const res = await this.send(`${this.base}/api/v1/deletions`, body);
    return (await res.json()) as Deletion;
  }

  /** One deletion, with its status and counts. */
  async deletion(id: string): Promise<Deletion> {
    const res = await this.send(`${this.base}/api/v1/deletions/${encodeURIComponent(id)}`);
    return (await res.json()) as Deletion;
  }

  /**
   * Every event received in [from, to), ascending by receivedAt then id (GET /api/v1/export).
   * NDJSON: yields records; when the connection drops, it continues with `after=` from the last
   * complete record, so no record is yielded twice or skipped (up to maxRetries times in a row).
   * Parquet: yields the file's bytes; a cut file cannot be resumed and throws.
   */
  export(query: ExportQuery & { format?: 'ndjson' }): AsyncGenerator<EventRecord, void, undefined>;
  export(query: ExportQuery & { format: 'parquet' }): AsyncGenerator<Uint8Array, void, undefined>;
  export(query: ExportQuery): AsyncGenerator<EventRecord | Uint8Array, void, undefined> {
    return query.format === 'parquet' ? this.exportParquet(query) : this.exportRecords(query);
  }

  private exportUrl(query: ExportQuery, to: string | undefined, after: string | undefined): string {
    return this.url('/api/v1/export', {
      appId: query.appId,
      from: time(query.from),
      to,
      format: query.format,
      testMode: query.testMode,
      after,
    });
  }

  private async *exportRecords(query: ExportQuery): AsyncGenerator<EventRecord, void, undefined> {
    let to = time(query.to);
    let after = query.after;
    for (let cuts = 0; ;) {
      const res = await this.send(this.exportUrl(query, to, after));
      // The window's end is fixed by the first answer, so that a resumed request reads the same window.
      to ??= res.headers.get('x-export-to') ?? undefined;
      try {
        for await (const line of lines(res)) {
          const record = JSON.parse(line) as EventRecord;
          after = `${record.receivedAt}:${record.id}`;
          cuts = 0;
          yield record;
        }
        return;
      } catch (err) {
        if (err instanceof SyntaxError || ++cuts > this.maxRetries) {
          throw new TallyError({ status: 0, code: 'network_error', detail: String(err), cause: err });
        }
        await this.sleep(Math.min(30_000, 250 * 2 ** cuts));
      }
    }
  }

  private async *exportParquet(query: ExportQuery): AsyncGenerator<Uint8Array, void, undefined> {
    const res = await this.send(this.exportUrl(query, time(query.to), query.after));
    if (!res.body) return;
    const reader = res.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        yield value;
      }
    } catch (err) {
      throw new TallyError({ status: 0, code: 'network_error', detail: String(err), cause: err });
    } finally {
      reader.releaseLock();
    }
  }

  private url(path: string, params: Record<string, string | number | boolean | undefined>): string {
    const search = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined) search.set(k, String(v));
    return `${this.base}${path}?${search}`;
  }

  private next(res: Response, current: string): string | null {
    const link = NEXT_LINK.exec(res.headers.get('link') ?? '');
    if (link) return new URL(link[1], this.base + '/').toString();
    const cursor = res.headers.get('x-next-cursor');
    if (!cursor) return null;
    const url = new URL(current);
    url.searchParams.set('cursor', cursor);
    return url.toString();
  }

  /** GET `url`, or POST `body` as JSON to it; retries 429 and 503. */
  private async send(url: string, body?: string): Promise<Response> {
    const init: RequestInit =
      body === undefined
        ? { headers: { authorization: this.authorization } }
        : {
            method: 'POST',
            body,
            headers: { authorization: this.authorization, 'content-type': 'application/json' },
          };
    for (let attempt = 0; ; attempt++) {
      let res: Response;
      try {
        res = await this.fetchImpl(url, init);
      } catch (err) {
        throw new TallyError({ status: 0, code: 'network_error', detail: String(err), cause: err });
      }
      if (res.ok) return res;
      const error = await TallyError.fromResponse(res);
      if ((res.status === 429 || res.status === 503) && attempt < this.maxRetries) {
        await this.sleep(error.retryAfterMs ?? 1000);
        continue;
      }
      throw error;
    }
  }
}

/** The complete lines of an NDJSON body; a last line cut short is never yielded. */
async function* lines(res: Response): AsyncGenerator<string, void, undefined> {
  if (!res.body) return;
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let rest = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const parts = (rest + value).split('\n');
      rest = parts.pop()!;
      for (const line of parts) if (line !== '') yield line;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

function time(v: number | string | Date | undefined): string | undefined {
  if (v === undefined) return undefined;
  if (v instanceof Date) return String(v.getTime());
  return String(v);
}
