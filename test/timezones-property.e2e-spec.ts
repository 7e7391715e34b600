import fc from 'fast-check';
import request from 'supertest';
import { AppsService } from '@app/auth/apps.service';
import { RollupsService } from '@app/rollups/rollups.service';
import { PartitionRepository } from '@app/storage/partition.repository';
import { utcDateString } from '@app/common/time';
import { addDays } from '@app/common/reads/time-params';
import { localDayStart } from '@app/common/timezones';
import { bearer, makeApiKey, TEST_ACTOR } from './factories';
import { seedEvents } from './factories/events';
import { useTestApp } from './support/test-app';

// Zones with daylight saving in either hemisphere, half- and quarter-hour offsets, a
// 30-minute DST shift (Lord Howe), a negative DST (Dublin), DST at midnight (Havana, Santiago,
// Asuncion), the extremes (Kiritimati +14, Pago Pago -11, Etc/GMT+12) and plain UTC.
const ZONES = [
  'UTC',
  'America/New_York',
  'America/Los_Angeles',
  'America/Denver',
  'America/Phoenix',
  'America/St_Johns',
  'America/Havana',
  'America/Santiago',
  'America/Asuncion',
  'America/Sao_Paulo',
  'Europe/London',
  'Europe/Dublin',
  'Europe/Berlin',
  'Africa/Casablanca',
  'Asia/Tehran',
  'Asia/Kolkata',
  'Asia/Kathmandu',
  'Asia/Tokyo',
  'Australia/Adelaide',
  'Australia/Sydney',
  'Australia/Lord_Howe',
  'Pacific/Auckland',
  'Pacific/Chatham',
  'Pacific/Kiritimati',
  'Pacific/Pago_Pago',
  'Etc/GMT+12',
];

const HOUR = 3_600_000;

/** The local calendar date of `t` in `zone`, by Intl alone: the brute-force reference. */
const formats = new Map<string, Intl.DateTimeFormat>();
function format(key: string, make: () => Intl.DateTimeFormat): Intl.DateTimeFormat {
  let f = formats.get(key);
  if (!f) formats.set(key, (f = make()));
  return f;
}

function referenceDate(t: number, zone: string): string {
  const parts = format(
    `date ${zone}`,
    () =>
      new Intl.DateTimeFormat('en-GB', { timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit' }),
  ).formatToParts(t);
  const get = (type: string) => parts.find((p) => p.type === type)!.value;
  return `${get('year')}-${get('month')}-${get('day')}`;
}

function offsetOf(t: number, zone: string): number {
  const parts = format(
    `time ${zone}`,
    () =>
      new Intl.DateTimeFormat('en-US', {
        timeZone: zone,
        hourCycle: 'h23',
        year: 'numeric',
        month: 'numeric',
        day: 'numeric',
        hour: 'numeric',
        minute: 'numeric',
      }),
  ).formatToParts(t);
  const n = (type: string) => Number(parts.find((p) => p.type === type)!.value);
  return (
    Date.UTC(n('year'), n('month') - 1, n('day'), n('hour'), n('minute')) - Math.floor(t / 60_000) * 60_000
  );
}

/**
 * Instants worth testing around in 2026: each offset change (found hour by hour), the local
 * midnights of the days around it, and a plain day.
 */
function anchorsOf(zone: string): number[] {
  const anchors = [Date.parse('2026-06-15T12:00:00Z')];
  const start = Date.parse('2026-01-03T00:00:00Z');
  const end = Date.parse('2026-12-28T00:00:00Z');
  let previous = offsetOf(start, zone);
  for (let t = start + HOUR; t < end; t += HOUR) {
    const offset = offsetOf(t, zone);
    if (offset !== previous) {
      anchors.push(t);
      const date = referenceDate(t, zone);
      for (const day of [addDays(date, -1), date, addDays(date, 1)]) anchors.push(localDayStart(day, zone));
    }
    previous = offset;
  }
  return anchors;
}

interface Ev {
  anchor: number;
  shift: number;
  user: string | null;
  name: string;
  test: boolean;
}

describe('rollups in random zones match a brute-force count by Intl', () => {
  const t = useTestApp();
  const partitions = new Set<string>();

  async function ensurePartitions(instants: number[]) {
    for (const day of new Set(instants.map((i) => utcDateString(i)))) {
      if (partitions.has(day)) continue;
      await t.app.get(PartitionRepository).create(new Date(`${day}T00:00:00Z`));
      partitions.add(day);
    }
  }

  it('uses at least 20 zones', () => expect(ZONES.length).toBeGreaterThanOrEqual(20));

  it.each(ZONES)('holds in %s, DST edges included', async (zone) => {
    const service = t.app.get(RollupsService);
    {
      const anchors = anchorsOf(zone);
      const event = fc.record({
        anchor: fc.nat({ max: anchors.length - 1 }),
        // Within 30 hours of the anchor, to the minute, and often right at a boundary.
        shift: fc.oneof(
          fc.integer({ min: -1800, max: 1800 }).map((m) => m * 60_000),
          fc.integer({ min: -2, max: 2 }),
        ),
        user: fc.constantFrom('a', 'b', 'c', null),
        name: fc.constantFrom('X', 'Y'),
        test: fc.boolean(),
      });
      await fc.assert(
        fc.asyncProperty(fc.array(event, { minLength: 1, maxLength: 30 }), async (events: Ev[]) => {
          const app = await t.app.get(AppsService).create(`prop ${zone}`, TEST_ACTOR, zone);
          const api = await makeApiKey(t.app, [app.id]);
          const instants = events.map((e) => anchors[e.anchor] + e.shift);
          await ensurePartitions(instants);
          await seedEvents(
            t.db,
            app.id,
            events.map((e, i) => ({
              eventName: e.name,
              receivedAt: instants[i],
              ts: instants[i],
              anonymousUserId: e.user,
              isTestMode: e.test,
            })),
          );
          await service.compute({ appId: app.id });

          const expected = new Map<string, { events: number; users: Set<string> }>();
          events.forEach((e, i) => {
            const date = referenceDate(instants[i], zone);
            for (const name of ['', e.name]) {
              const key = `${date}|${name}|${e.test}`;
              const group = expected.get(key) ?? { events: 0, users: new Set<string>() };
              group.events++;
              if (e.user !== null) group.users.add(e.user);
              expected.set(key, group);
            }
          });
          const dates = [...expected.keys()].map((k) => k.split('|')[0]).sort();
          const res = await request(t.http)
            .get('/api/v1/rollups')
            .query({ appId: app.id, fromDate: dates[0], toDate: dates[dates.length - 1], testMode: 'all' })
            .set(bearer(api.key));
          expect(res.status).toBe(200);
          const actual = new Map<string, { events: number; users: number }>(
            (
              res.body as {
                date: string;
                eventName: string | null;
                isTestMode: boolean;
                events: number;
                uniqueUsers: number;
                timezone: string;
              }[]
            ).map((r) => {
              expect(r.timezone).toBe(zone);
              return [
                `${r.date}|${r.eventName ?? ''}|${r.isTestMode}`,
                { events: r.events, users: r.uniqueUsers },
              ];
            }),
          );
          expect(Object.fromEntries(actual)).toEqual(
            Object.fromEntries([...expected].map(([k, v]) => [k, { events: v.events, users: v.users.size }])),
          );
        }),
        { numRuns: 4 },
      );
    }
  });
});
