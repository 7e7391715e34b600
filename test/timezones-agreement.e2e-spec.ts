import { addDays } from '@app/common/reads/time-params';
import { isTimeZone, localDateString, localDayStart } from '@app/common/timezones';
import { useTestApp } from './support/test-app';

// Names Intl accepts beyond its canonical list: aliases in common use.
const ALIASES = [
  'UTC',
  'Etc/UTC',
  'GMT',
  'Asia/Kolkata',
  'US/Eastern',
  'US/Pacific',
  'Europe/Kyiv',
  'Etc/GMT+5',
];

/** The first day of each month of 2026, and the days around each change of the UTC offset at noon. */
function datesToCheck(zone: string): string[] {
  const dates = new Set<string>();
  let previous: number | null = null;
  for (let date = '2026-01-01'; date <= '2026-12-31'; date = addDays(date, 1)) {
    if (date.endsWith('-01')) dates.add(date);
    const noon = Date.parse(`${date}T12:00:00Z`);
    const offset =
      Date.parse(`${localDateString(noon, zone)}T00:00:00Z`) -
      localDayStart(localDateString(noon, zone), zone);
    if (previous !== null && offset !== previous) {
      for (const d of [addDays(date, -1), date, addDays(date, 1)]) dates.add(d);
    }
    previous = offset;
  }
  return [...dates];
}

// Zones whose 2026 rules differ between the tz data of Node's ICU and PostgreSQL's own copy,
// for the Node releases Tally runs on (Node 20's ICU has tz 2025c, Node 22.23's has 2026c).
// Tally computes every day boundary with Intl only (ingest's marks, the computation, `final`),
// so such a difference cannot split one day between two sets of rules; it only means that a
// query of the events table with `AT TIME ZONE` would see other midnights.
const TZDATA_DIFFERENCES: Record<string, string> = {
  'America/Vancouver':
    "PostgreSQL 18's tz data keeps British Columbia on UTC-07 from November 2026; Node 20's ICU still falls back",
  'America/Edmonton':
    "tz 2026c keeps Alberta on UTC-06 after March 2026; PostgreSQL 18's copy falls back in November",
  'Africa/Casablanca': "tz 2026c and PostgreSQL 18's copy put Morocco's 2026 offset changes on other dates",
  'Africa/El_Aaiun': 'follows Africa/Casablanca',
};

/**
 * Every zone the service accepts must be a name PostgreSQL knows (for `AT TIME ZONE` in ad-hoc
 * queries and reports), and the two must put every local midnight of 2026 at the same instant,
 * apart from the documented differences of tz data versions.
 */
describe('every accepted time zone means the same days to Intl and PostgreSQL', () => {
  const t = useTestApp();

  it('agrees on the local midnights of 2026 for every zone Intl lists, and common aliases', async () => {
    const zones = [...Intl.supportedValuesOf('timeZone'), ...ALIASES].filter((z) => isTimeZone(z));
    expect(zones.length).toBeGreaterThan(400);
    const known = (await t.db.query(`SELECT name FROM pg_timezone_names WHERE name = ANY($1)`, [zones])) as {
      name: string;
    }[];
    expect(zones.filter((z) => !known.some((k) => k.name === z))).toEqual([]);

    const checkZones: string[] = [];
    const instants: string[] = [];
    const expected: string[] = [];
    for (const zone of zones) {
      for (const date of datesToCheck(zone)) {
        const start = localDayStart(date, zone);
        checkZones.push(zone, zone);
        instants.push(new Date(start - 1).toISOString(), new Date(start).toISOString());
        expected.push(`${zone} ${addDays(date, -1)}`, `${zone} ${date}`);
      }
    }
    const rows = (await t.db.query(
      `SELECT z || ' ' || (i AT TIME ZONE z)::date::text AS got
         FROM unnest($1::text[], $2::timestamptz[]) WITH ORDINALITY AS x(z, i, n) ORDER BY n`,
      [checkZones, instants],
    )) as { got: string }[];
    const got = rows.map((r) => r.got);
    const disagreeing = new Set(expected.filter((e, i) => got[i] !== e).map((e) => e.split(' ')[0]));
    expect([...disagreeing].filter((z) => !(z in TZDATA_DIFFERENCES))).toEqual([]);
  });

  it('refuses offsets, POSIX rules and unknown names', () => {
    for (const bad of [
      '+05:00',
      '-0300',
      'EST5EDT,M3.2.0,M11.1.0',
      'Mars/Olympus_Mons',
      '',
      'Europe/',
      '../etc',
    ]) {
      expect(isTimeZone(bad)).toBe(false);
    }
  });
});
