import { MigrationInterface, QueryRunner } from 'typeorm';
import { hasCitus, sequentialCitusTransaction } from './citus';

/**
 * The users and sessions of a breakdown row become compact sorted lists (`bytea`: each member
 * as the unsigned LEB128 varint of its distance from the previous one minus one) instead of
 * bitmaps over every number the app has given. A value's members on one day are few beside the
 * app's history, so a list is smaller and a union over days and values reads only the members.
 * Kept rows are converted in place, one (app, day) at a time, so that days past retention keep
 * their breakdowns. The columns are stored out of line without compression: varints do not
 * compress, and trying costs every write.
 *
 * On Citus the transaction is sequential, so that the per-app statements after the table's DDL
 * use the connections that DDL used. The conversion is written out here rather than imported, so that this migration stays what it
 * was whatever the service's code becomes.
 */
const KEY = `app_id, rezone, dimension, day, is_test_mode, kind, value`;

/** Members of a bitmap in `varbit_send` form (bit length, then bytes; bit 0 is 0x80 of byte 0). */
function bitmapMembers(sent: Buffer): number[] {
  const bits = sent.readInt32BE(0);
  const out: number[] = [];
  for (let byte = 0; byte * 8 < bits; byte++) {
    const v = sent[4 + byte];
    if (!v) continue;
    for (let b = 0; b < 8; b++) if (v & (0x80 >> b)) out.push(byte * 8 + b);
  }
  return out;
}

function listOf(members: number[]): Buffer {
  const bytes: number[] = [];
  let previous = -1;
  for (const no of members) {
    let gap = no - previous - 1;
    while (gap >= 0x80) {
      bytes.push((gap & 0x7f) | 0x80);
      gap = Math.floor(gap / 0x80);
    }
    bytes.push(gap);
    previous = no;
  }
  return Buffer.from(bytes);
}

function listMembers(list: Buffer): number[] {
  const out: number[] = [];
  let previous = -1;
  let at = 0;
  while (at < list.length) {
    let gap = 0;
    let scale = 1;
    let byte: number;
    do {
      byte = list[at++];
      gap += (byte & 0x7f) * scale;
      scale *= 0x80;
    } while (byte & 0x80 && at < list.length);
    previous += gap + 1;
    out.push(previous);
  }
  return out;
}

/** A bitmap's bytes (whole bytes up to the largest member) as hex, for `('x' || hex)::varbit`. */
function bitmapHex(members: number[]): string {
  if (!members.length) return '';
  const out = Buffer.alloc((members[members.length - 1] >> 3) + 1);
  for (const no of members) out[no >> 3] |= 0x80 >> (no & 7);
  return out.toString('hex');
}

interface Row {
  app_id: string;
  rezone: boolean;
  dimension: string;
  day: string;
  is_test_mode: boolean;
  kind: number;
  value: string;
  u: Buffer;
  s: Buffer;
}

/** Rewrites every breakdown row, one (app, day) at a time, from the old columns into the new. */
async function convert(
  q: QueryRunner,
  read: string,
  write: string,
  type: 'bytea' | 'text',
  map: (value: Buffer) => Buffer | string,
): Promise<void> {
  const groups = (await q.query(`SELECT DISTINCT app_id, day::text AS day FROM insight_breakdowns`)) as {
    app_id: string;
    day: string;
  }[];
  for (const { app_id, day } of groups) {
    const rows = (await q.query(
      `SELECT ${KEY}, ${read} FROM insight_breakdowns WHERE app_id = $1 AND day = $2::date`,
      [app_id, day],
    )) as Row[];
    await q.query(
      `UPDATE insight_breakdowns t SET ${write}
         FROM unnest($3::boolean[], $4::text[], $5::boolean[], $6::smallint[], $7::text[], $8::${type}[],
                     $9::${type}[])
              AS r(rezone, dimension, is_test_mode, kind, value, u, s)
        WHERE t.app_id = $1 AND t.day = $2::date AND t.rezone = r.rezone AND t.dimension = r.dimension
          AND t.is_test_mode = r.is_test_mode AND t.kind = r.kind AND t.value = r.value`,
      [
        app_id,
        day,
        rows.map((r) => r.rezone),
        rows.map((r) => r.dimension),
        rows.map((r) => r.is_test_mode),
        rows.map((r) => r.kind),
        rows.map((r) => r.value),
        rows.map((r) => map(r.u)),
        rows.map((r) => map(r.s)),
      ],
    );
  }
}

/**
 * The lists out of line without compression. Citus refuses `SET STORAGE` on a distributed table,
 * and its shards cannot be altered from inside this transaction (the command would wait for the
 * locks the transaction holds on them), so there only the coordinator's table is set here, and
 * the shards by the migration that follows (1764700000000-citus-shard-list-storage).
 */
async function setListStorage(q: QueryRunner, citus: boolean): Promise<void> {
  const alter = `ALTER TABLE insight_breakdowns ALTER COLUMN users SET STORAGE EXTERNAL, ALTER COLUMN sessions SET STORAGE EXTERNAL`;
  if (!citus) {
    await q.query(alter);
    return;
  }
  await q.query(`SET LOCAL citus.enable_ddl_propagation TO off`);
  await q.query(alter);
  await q.query(`SET LOCAL citus.enable_ddl_propagation TO on`);
}

export class BreakdownMemberLists1764500000000 implements MigrationInterface {
  name = 'BreakdownMemberLists1764500000000';

  async up(q: QueryRunner): Promise<void> {
    const citus = await hasCitus(q);
    if (citus) await sequentialCitusTransaction(q);
    await q.query(`ALTER TABLE insight_breakdowns ADD COLUMN user_list bytea, ADD COLUMN session_list bytea`);
    await convert(
      q,
      `varbit_send(users) AS u, varbit_send(sessions) AS s`,
      `user_list = r.u, session_list = r.s`,
      'bytea',
      (sent) => listOf(bitmapMembers(sent)),
    );
    await q.query(`ALTER TABLE insight_breakdowns DROP COLUMN users, DROP COLUMN sessions`);
    await q.query(`ALTER TABLE insight_breakdowns RENAME COLUMN user_list TO users`);
    await q.query(`ALTER TABLE insight_breakdowns RENAME COLUMN session_list TO sessions`);
    await q.query(
      `ALTER TABLE insight_breakdowns ALTER COLUMN users SET NOT NULL, ALTER COLUMN sessions SET NOT NULL`,
    );
    await setListStorage(q, citus);
  }

  async down(q: QueryRunner): Promise<void> {
    if (await hasCitus(q)) await sequentialCitusTransaction(q);
    await q.query(
      `ALTER TABLE insight_breakdowns ADD COLUMN user_bits varbit, ADD COLUMN session_bits varbit`,
    );
    await convert(
      q,
      `users AS u, sessions AS s`,
      `user_bits = ('x' || r.u)::varbit, session_bits = ('x' || r.s)::varbit`,
      'text',
      (list) => bitmapHex(listMembers(list)),
    );
    await q.query(`ALTER TABLE insight_breakdowns DROP COLUMN users, DROP COLUMN sessions`);
    await q.query(`ALTER TABLE insight_breakdowns RENAME COLUMN user_bits TO users`);
    await q.query(`ALTER TABLE insight_breakdowns RENAME COLUMN session_bits TO sessions`);
    await q.query(
      `ALTER TABLE insight_breakdowns ALTER COLUMN users SET NOT NULL, ALTER COLUMN sessions SET NOT NULL`,
    );
  }
}
