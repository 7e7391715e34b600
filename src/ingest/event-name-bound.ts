import { DAY_MS, utcDateString } from '@app/common/time';

/** How often a day in use is merged again with the names stored by every instance. */
export const NAMES_REFRESH_MS = 60_000;

/** Admits an otherwise valid event's name on its day, or refuses it with `message`. */
export interface EventNameAdmission {
  admit(eventName: string, ts: number): boolean;
  readonly message: string;
}

/** Loads the event names already stored for an app's UTC day (`YYYY-MM-DD`). */
export type DayNamesLoader = (appId: string, day: string) => Promise<string[]>;

export interface EventNameBoundOptions {
  /** Distinct names per app and UTC day. */
  limit: number;
  /** Days kept in memory: events older than this many days are refused by ingest anyway. */
  maxAgeDays: number;
  /** How often a day in use is merged again with the stored names (other instances' names). */
  refreshMs: number;
  /** Called once per app-day and instance when the day first refuses a new name. */
  onLimitReached?: () => void;
  onLoadError?: (err: unknown) => void;
}

interface DayNames {
  readonly names: Set<string>;
  /** When the stored names were last merged in (or asked for); 0 before the first time. */
  loadedAt: number;
  loading: boolean;
  reached: boolean;
}

/**
 * The per-app bound of distinct event names per UTC day, checked in memory: one Set lookup per
 * event and no query on the request path. Each (app, day) set is filled from what this instance
 * admits and merged, in the background, with the names the rollups already hold for that day (on
 * first use, then at most every `refreshMs`), so a restart or another instance's names catch up
 * within a rollup interval plus `refreshMs`. Until then an instance may admit up to `limit` names
 * of its own: the rollup computation caps the rows per day whatever ingest admitted.
 */
export class EventNameBound {
  private readonly apps = new Map<string, Map<number, DayNames>>();
  private oldestKept = 0;
  private readonly message: string;

  constructor(
    private readonly options: EventNameBoundOptions,
    private readonly load: DayNamesLoader,
  ) {
    this.message =
      `This app has reached its limit of ${options.limit} distinct event names for the UTC day of this ` +
      'event (INGEST_MAX_EVENT_NAMES_PER_DAY): an event with a new name is rejected until the day ' +
      'ends, while events with names already seen that day are accepted.';
  }

  get limit(): number {
    return this.options.limit;
  }

  /** The admission of one request of `appId`, received at `now`. */
  forApp(appId: string, now: number): EventNameAdmission {
    this.forget(now);
    let days = this.apps.get(appId);
    if (days === undefined) {
      days = new Map();
      this.apps.set(appId, days);
    }
    const appDays = days;
    const limit = this.options.limit;
    let lastDay = NaN;
    let current: DayNames | undefined;
    return {
      message: this.message,
      admit: (name: string, ts: number): boolean => {
        const day = Math.floor(ts / DAY_MS);
        if (day !== lastDay) {
          current = this.day(appId, appDays, day, now);
          lastDay = day;
        }
        const names = current!.names;
        if (names.has(name)) return true;
        if (names.size < limit) {
          names.add(name);
          return true;
        }
        if (!current!.reached) {
          current!.reached = true;
          this.options.onLimitReached?.();
        }
        return false;
      },
    };
  }

  /**
   * Resolves once the app's days of `timestamps` hold the names stored for them: a caller that
   * admits names without waiting on a request (the quarantine replay) waits for them first.
   */
  async loaded(appId: string, timestamps: Iterable<number>, now: number): Promise<void> {
    this.forget(now);
    let days = this.apps.get(appId);
    if (days === undefined) this.apps.set(appId, (days = new Map()));
    const seen = new Set<number>();
    for (const ts of timestamps) {
      const day = Math.floor(ts / DAY_MS);
      if (seen.has(day)) continue;
      seen.add(day);
      this.day(appId, days, day, now);
    }
    await this.settled();
  }

  /** Resolves once no merge with the stored names is under way (for tests and benchmarks). */
  async settled(): Promise<void> {
    while ([...this.apps.values()].some((days) => [...days.values()].some((d) => d.loading))) {
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  private day(appId: string, days: Map<number, DayNames>, day: number, now: number): DayNames {
    let entry = days.get(day);
    if (entry === undefined) {
      entry = { names: new Set(), loadedAt: 0, loading: false, reached: false };
      days.set(day, entry);
    }
    if (!entry.loading && now - entry.loadedAt >= this.options.refreshMs) this.merge(appId, day, entry, now);
    return entry;
  }

  private merge(appId: string, day: number, entry: DayNames, now: number): void {
    entry.loading = true;
    entry.loadedAt = now;
    this.load(appId, utcDateString(day * DAY_MS))
      .then((stored) => {
        for (const name of stored) entry.names.add(name);
      })
      .catch((err: unknown) => {
        // Retried on the next request: the bound then rests on this instance's own names.
        entry.loadedAt = 0;
        this.options.onLoadError?.(err);
      })
      .finally(() => {
        entry.loading = false;
      });
  }

  /** Drops days too old to receive events, at most once per day. */
  private forget(now: number): void {
    const oldest = Math.floor(now / DAY_MS) - this.options.maxAgeDays - 1;
    if (oldest <= this.oldestKept) return;
    this.oldestKept = oldest;
    for (const [appId, days] of this.apps) {
      for (const day of days.keys()) if (day < oldest) days.delete(day);
      if (days.size === 0) this.apps.delete(appId);
    }
  }
}
