// The migration that turns the breakdowns' user and session bitmaps into compact lists keeps
// every kept row's members, and its `down` gives the same bitmaps back.
import { MIGRATIONS } from '@migrations/index';
import { BreakdownMemberLists1764500000000 } from '@migrations/1764500000000-breakdown-member-lists';
import { decodeMembers } from '@app/insights/member-lists';
import { migrationStep, useMigrationDatabase } from './support/databases';

const APP = '0190a8d2-0000-7000-8000-0000000000aa';

/**
 * A bitmap as the service wrote them, in PostgreSQL's text form: whole bytes up to the largest
 * member, '1' where a member is.
 */
const bits = (members: number[]) =>
  Array.from({ length: members.length ? ((Math.max(...members) >> 3) + 1) * 8 : 0 }, (_, i) =>
    members.includes(i) ? '1' : '0',
  ).join('');

describe('migration: breakdown sets as compact lists', () => {
  const db = useMigrationDatabase('tally_member_lists');
  const at = MIGRATIONS.indexOf(BreakdownMemberLists1764500000000);

  it('converts every kept row, on every day and app, and back', async () => {
    expect(at).toBeGreaterThan(0);
    for (const Migration of MIGRATIONS.slice(0, at)) await migrationStep(db, (r) => new Migration().up(r));
    const rows = [
      // In the key's order ("C" collation): 'Web' before 'iOS'.
      { day: '2025-01-01', value: 'Web', users: [], sessions: [] },
      { day: '2025-01-01', value: 'iOS', users: [0, 9, 17, 1000], sessions: [3] },
      { day: '2025-03-09', value: 'iOS', users: [7], sessions: [200, 201, 202] },
    ];
    for (const r of rows) {
      await db.query(
        `INSERT INTO insight_breakdowns (app_id, rezone, dimension, day, is_test_mode, kind, value, events, fv_count,
                                         users, sessions, timezone, day_end, computed_at)
         VALUES ($1, false, 'platform', $2::date, false, 0, $3, 5, 0, $4::varbit, $5::varbit, 'UTC', now(), now())`,
        [APP, r.day, r.value, bits(r.users), bits(r.sessions)],
      );
    }
    const before = (await db.query(
      `SELECT day::text AS day, value, users::text AS users, sessions::text AS sessions
         FROM insight_breakdowns ORDER BY day, value`,
    )) as { day: string; value: string; users: string; sessions: string }[];

    await migrationStep(db, (r) => new BreakdownMemberLists1764500000000().up(r));
    const lists = (await db.query(
      `SELECT day::text AS day, value, users, sessions FROM insight_breakdowns ORDER BY day, value`,
    )) as { day: string; value: string; users: Buffer; sessions: Buffer }[];
    expect(lists.map((l) => [l.day, l.value, decodeMembers(l.users), decodeMembers(l.sessions)])).toEqual(
      rows.map((r) => [r.day, r.value, r.users, r.sessions]),
    );
    const [storage] = (await db.query(
      `SELECT string_agg(attname || '=' || attstorage::text, ',' ORDER BY attname) AS s FROM pg_attribute
        WHERE attrelid = 'insight_breakdowns'::regclass AND attname IN ('users', 'sessions')`,
    )) as { s: string }[];
    expect(storage.s).toBe('sessions=e,users=e');

    await migrationStep(db, (r) => new BreakdownMemberLists1764500000000().down(r));
    const after = (await db.query(
      `SELECT day::text AS day, value, users::text AS users, sessions::text AS sessions
         FROM insight_breakdowns ORDER BY day, value`,
    )) as typeof before;
    expect(after).toEqual(before);
    expect(before[1].users).toHaveLength(1008);
  });
});
