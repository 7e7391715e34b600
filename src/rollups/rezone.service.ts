import { Inject, Injectable } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { AppError } from '@app/common/app-error';
import { DAY_MS, utcDateString } from '@app/common/time';
import { normaliseAppId, UUID } from '@app/common/ids';
import { addDays } from '@app/common/reads/time-params';
import { localDateString, localDatesOverlapping, localDayBounds, localDayStart } from '@app/common/timezones';
import { assertTimeZone } from '@app/auth/timezone-validation';
import { AuditService } from '@app/audit/audit.service';
import type { AuditActor } from '@app/audit/audit.types';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { AppDay, LocalDayTarget, RollupComputationRepository } from './rollup-computation.repository';
import { AppZones, RezoneRepository } from './rezone.repository';

/** One transaction of the computation: the days of one app to recompute, and the marks it consumes. */
export interface RecomputeItem {
  appId: string;
  targets: LocalDayTarget[];
  consume?: { day: string; zone: string };
}

export interface ZoneChange {
  appId: string;
  timezone: string;
  previousTimezone: string;
  /** True when the rollups of the retained days are recomputed in the new zone. */
  recomputing: boolean;
  /** The first local day recomputed; older days keep their rows and their zone. */
  fromDate: string | null;
}

// How long one scheduled run works on zone changes before it lets the lock go; the next run
// resumes where it stopped.
const REZONE_SLICE_MS = 10_000;
// How long a zone change waits for a running computation to let go of the lock.
const SET_ZONE_LOCK_WAIT_MS = 120_000;

function target(day: string, zone: string, set: LocalDayTarget['set']): LocalDayTarget {
  return { day, zone, set, ...localDayBounds(day, zone) };
}

/**
 * Local days and zone changes of the rollup computation. A dirty mark names a local day in the
 * zone ingest had cached; it is recomputed in the served zone (the days of that zone it
 * overlaps, when the two differ) and, while a zone change runs, in the new zone too when that
 * day is already built. A zone change builds the new set a day per transaction beside the
 * served one, and swaps it in at once when complete: reads answer from the old set until then.
 */
@Injectable()
export class RezoneService {
  constructor(
    private readonly computation: RollupComputationRepository,
    private readonly rezone: RezoneRepository,
    @Inject(APP_CONFIG)
    private readonly config: ConfigSlice<'eventRetentionDays' | 'ingestMaxEventNamesPerDay'>,
    private readonly audit: AuditService,
  ) {}

  /** The transactions that recompute `marks` (consumed) and `days` (local days of the served zone). */
  async plan(runner: QueryRunner, marks: Required<AppDay>[], days: AppDay[]): Promise<RecomputeItem[]> {
    const appIds = [...new Set([...marks, ...days].map((d) => d.appId))];
    const zones = appIds.length ? await this.rezone.zonesOf(runner, appIds) : new Map<string, AppZones>();
    const items: RecomputeItem[] = [];
    const seen = new Set<string>();
    for (const mark of marks) {
      const app = zones.get(mark.appId);
      const targets = app ? targetsOfMark(mark, app) : [];
      for (const t of targets) if (t.set === 'served') seen.add(`${mark.appId} ${t.day}`);
      items.push({ appId: mark.appId, targets, consume: { day: mark.day, zone: mark.zone } });
    }
    for (const day of days) {
      const app = zones.get(day.appId);
      const key = `${day.appId} ${day.day}`;
      if (!app || (day.zone !== undefined && day.zone !== app.served) || seen.has(key)) continue;
      seen.add(key);
      const consume = { day: day.day, zone: app.served };
      items.push({ appId: day.appId, targets: [target(day.day, app.served, 'served')], consume });
    }
    return items;
  }

  /**
   * The local days, in each app's served zone, that overlap the UTC days `utcDays`, within
   * [range.from, range.to] when given.
   */
  async localDaysOf(
    runner: QueryRunner,
    utcDays: AppDay[],
    range: { from?: string; to?: string },
  ): Promise<AppDay[]> {
    const zones = await this.rezone.zonesOf(runner, [...new Set(utcDays.map((d) => d.appId))]);
    const seen = new Set<string>();
    const days: AppDay[] = [];
    for (const { appId, day: utcDay } of utcDays) {
      const app = zones.get(appId);
      if (!app) continue;
      const start = Date.parse(`${utcDay}T00:00:00Z`);
      for (const day of localDatesOverlapping(start, start + DAY_MS, app.served)) {
        const key = `${appId} ${day}`;
        if ((range.from !== undefined && day < range.from) || (range.to !== undefined && day > range.to))
          continue;
        if (seen.has(key)) continue;
        seen.add(key);
        days.push({ appId, day, zone: app.served });
      }
    }
    return days;
  }

  /**
   * Sets an app's zone. Under the computation lock, so that no run builds a set for a zone that
   * is being replaced. The retained days (those whose events are still stored) are then
   * recomputed in the new zone by the scheduled computation.
   */
  async setTimezone(
    appIdInput: string,
    zoneInput: string,
    actor: AuditActor,
    now = Date.now(),
  ): Promise<ZoneChange> {
    const appId = normaliseAppId(appIdInput);
    if (!UUID.test(appId)) throw new AppError('invalid_body', `appId must be a UUID, got "${appIdInput}"`);
    const zone = assertTimeZone(zoneInput);
    const fromDate = firstRetainedDay(now - this.config.eventRetentionDays * DAY_MS, zone);
    const locked = await this.computation.withComputationLock(
      () =>
        this.rezone.transaction(async (tx) => {
          const change = await this.rezone.setZone(tx, appId, zone, fromDate);
          if (change && change.previous !== zone) {
            await this.audit.record(
              {
                action: 'app.timezone_changed',
                actor,
                appId,
                targetId: appId,
                details: {
                  from: change.previous,
                  to: zone,
                  recomputeFrom: change.recomputing ? fromDate : null,
                },
              },
              tx,
            );
          }
          return change;
        }),
      SET_ZONE_LOCK_WAIT_MS,
    );
    if (!locked.locked) throw new AppError('service_unavailable', 'A rollup computation is still running.');
    const change = locked.value;
    if (change === null) throw new AppError('not_found', `No such app: ${appId}`);
    return {
      appId,
      timezone: zone,
      previousTimezone: change.previous,
      recomputing: change.recomputing,
      fromDate: change.recomputing ? fromDate : null,
    };
  }

  /**
   * Builds the new sets of pending zone changes, one local day per transaction, for about
   * `budgetMs` at most, and swaps each complete set in. Stops early when `stop()` says so.
   */
  async step(
    runner: QueryRunner,
    now: number,
    stop: () => boolean,
    budgetMs = REZONE_SLICE_MS,
  ): Promise<{ days: number; rows: number; swapped: number }> {
    const started = Date.now();
    let days = 0;
    let rows = 0;
    let swapped = 0;
    for (const { appId, job } of await this.rezone.pending(runner)) {
      const today = localDateString(now, job!.zone);
      let day = job!.nextDay;
      for (; day <= today; day = addDays(day, 1)) {
        if (stop() || Date.now() - started >= budgetMs) return { days, rows, swapped };
        rows += await this.computation.recomputeDays(
          runner,
          appId,
          [target(day, job!.zone, 'rezone')],
          this.config.ingestMaxEventNamesPerDay,
        );
        days++;
      }
      await this.rezone.swap(runner, appId, job!.zone, job!.fromDay);
      swapped++;
    }
    return { days, rows, swapped };
  }
}

/**
 * The first local day in `zone` whose events are all still stored: partitions are kept from
 * the UTC day of `cutoff` on, so the local day must not start before that UTC midnight.
 */
function firstRetainedDay(cutoff: number, zone: string): string {
  const keptFrom = Date.parse(`${utcDateString(cutoff)}T00:00:00Z`);
  const day = localDateString(keptFrom, zone);
  return localDayStart(day, zone) < keptFrom ? addDays(day, 1) : day;
}

/** The days a dirty mark makes stale: in the served zone, and in a pending change's zone if built. */
function targetsOfMark(mark: Required<AppDay>, app: AppZones): LocalDayTarget[] {
  const { start, end } = localDayBounds(mark.day, mark.zone);
  const inZone = (zone: string) =>
    zone === mark.zone ? [mark.day] : localDatesOverlapping(start, end, zone);
  const targets = inZone(app.served).map((day) => target(day, app.served, 'served'));
  const job = app.job;
  if (job) {
    for (const day of inZone(job.zone)) {
      if (day >= job.fromDay && day < job.nextDay) targets.push(target(day, job.zone, 'rezone'));
    }
  }
  return targets;
}
