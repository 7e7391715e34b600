import { Injectable } from '@nestjs/common';
import { ReadDatabase } from '@app/database/read-database';
import { withDriverClient } from '@app/database/driver-client';
import type { TestModeFilter } from '@app/common/reads/query-params';
import { to as copyTo } from 'pg-copy-streams';
import type { ChunkBuffers } from './chunk-buffers';
import { EVENT_COLUMN as c, eventField } from '@app/common/events/event-fields';
import { completeRowsEnd, EXPORT_FIELDS, type ExportPosition } from './copy-rows';

export type { ExportPosition } from './copy-rows';

/** What an export reads: one app's events received in [fromMs, toMs). */
export interface ExportWindow {
  appId: string;
  fromMs: number;
  toMs: number;
  testMode: TestModeFilter;
}

const iso = (ms: number) => new Date(ms).toISOString();

const payload = eventField('payload');

/**
 * The columns of an exported row, in the order ./copy-rows.ts reads them from the binary COPY
 * (EXPORT_FIELDS): stored values as they are (timestamps as microseconds, the id as an integer,
 * text as UTF-8), which the server writes as NDJSON or Parquet. The last column is the older
 * jsonb payload as text, only where no json text is stored.
 */
const EXPORT_COLUMNS = [
  ...EXPORT_FIELDS.map((f) => `e.${f.column}`),
  `CASE WHEN e.${payload.column} IS NULL THEN e.${payload.legacyColumn}::text END`,
];

/**
 * What a row weighs against a chunk's byte bound in the statement: its payload's length, which
 * PostgreSQL reads from the value's header without decompressing it (the older jsonb payload:
 * its stored size), and 512 bytes for the other columns.
 */
const ROW_WEIGHT = `512 + coalesce(octet_length(e.${payload.column}::text), pg_column_size(e.${payload.legacyColumn}), 0)`;

type SqlType = 'uuid' | 'timestamptz' | 'boolean' | 'bigint';

/** The window's conditions, and the position's, over `events e`, their values as checked literals. */
function windowWhere(window: ExportWindow, after: ExportPosition | null): string {
  const where = [
    `e.${c.appId} = ${literal(window.appId, 'uuid')}`,
    `e.${c.receivedAt} >= ${literal(iso(window.fromMs), 'timestamptz')}`,
    `e.${c.receivedAt} < ${literal(iso(window.toMs), 'timestamptz')}`,
  ];
  if (window.testMode !== 'all')
    where.push(`e.${c.isTestMode} = ${literal(window.testMode === 'true', 'boolean')}`);
  if (after) {
    const at = `timestamptz 'epoch' + ${literal(BigInt.asIntN(64, after.receivedUs).toString(), 'bigint')} * interval '1 microsecond'`;
    const id = literal(BigInt.asIntN(64, after.id).toString(), 'bigint');
    // The plain bound is what starts each partition's index scan at the position. The index is
    // (app, receive time DESC, id DESC), read backwards; a row comparison alone is checked on
    // every index entry from the start of the window instead, so the chunk at the millionth row
    // of a day read a million entries first (27 of its 50 ms; 11 s of a 2-million-event export).
    where.push(`e.${c.receivedAt} >= ${at}`);
    where.push(`(e.${c.receivedAt}, e.${c.id}) > (${at}, ${id})`);
  }
  return where.join(' AND ');
}

const LITERAL_SHAPES: Record<Exclude<SqlType, 'boolean'>, RegExp> = {
  uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/,
  timestamptz: /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/,
  bigint: /^-?\d{1,19}$/,
};

/**
 * Each value written into the SQL, for COPY, which takes no parameters. A value is written only
 * once it is checked to have its type's shape (a lower-case uuid, an ISO instant, digits), so
 * nothing else can get in.
 */
function literal(value: string | boolean, type: SqlType): string {
  if (typeof value === 'boolean') return String(value);
  if (type === 'boolean' || !LITERAL_SHAPES[type].test(value))
    throw new Error(`export: not a ${type}: ${value}`);
  return `'${value}'::${type}`;
}

/** The chunk's statement: its rows by the index, in order. */
function plainSql(window: ExportWindow, after: ExportPosition | null, limit: number): string {
  return `COPY (SELECT ${EXPORT_COLUMNS.join(', ')}
                  FROM events e
                 WHERE ${windowWhere(window, after)}
                 ORDER BY e.${c.receivedAt}, e.${c.id}
                 LIMIT ${limit}) TO STDOUT (FORMAT binary)`;
}

/**
 * The same rows, up to the first whose weight takes them past `maxBytes`. The rows are read by
 * the index first, with the LIMIT, and weighed after, over that same order, which needs no sort
 * (a window sum over the scan itself let the planner sort the whole window for every chunk).
 */
function weighedSql(
  window: ExportWindow,
  after: ExportPosition | null,
  limit: number,
  maxBytes: number,
): string {
  const named = EXPORT_COLUMNS.map((column, i) => `${column} AS c${i}`).join(', ');
  const columns = EXPORT_COLUMNS.map((_, i) => `c${i}`).join(', ');
  return `COPY (SELECT ${columns}
                  FROM (SELECT ${columns}, sum(w) OVER (ORDER BY c0, c1 ROWS UNBOUNDED PRECEDING) - w AS weight_before
                          FROM (SELECT ${named}, ${ROW_WEIGHT} AS w
                                  FROM events e
                                 WHERE ${windowWhere(window, after)}
                                 ORDER BY e.${c.receivedAt}, e.${c.id}
                                 LIMIT ${limit}) chunk) weighed
                 WHERE weight_before < ${maxBytes}
                 ORDER BY c0, c1) TO STDOUT (FORMAT binary)`;
}

/**
 * The export's reads. They go through ReadDatabase, as GET /api/v1/events does: the read pool,
 * its READ_STATEMENT_TIMEOUT_MS (per chunk: each chunk is one statement), no parallel workers,
 * and the replica when one is configured and healthy.
 */
@Injectable()
export class ExportRepository {
  constructor(private readonly read: ReadDatabase) {}

  /**
   * The next rows of the window strictly after `after`, ascending by (receivedAt, id): at most
   * `limit`, and no more than the complete rows that fit in `maxBytes` (at least one), so that a
   * chunk of large events stays as small as one of small events. As PostgreSQL's binary COPY of
   * EXPORT_COLUMNS (./copy-rows.ts reads it), in a buffer from `buffers`. No bound on `ts`, the
   * partition key: a late event sits in the partition of its event-time day, so every partition
   * may hold rows of the window. Each partition answers from its (app, receivedAt DESC, id
   * DESC) index, read backwards, and PostgreSQL merges them in order; a partition with nothing in
   * the window costs one index descent. The position is in microseconds, as stored, so paging is
   * exact whatever the precision of receivedAt. One statement; the whole chunk is read before it
   * is returned, so a read retried on the primary starts over. Past `maxBytes` the statement's
   * further rows are read and dropped, not kept: the caller asks for about as many rows as fit
   * (ExportService.nextAsk), so few are. With `weigh` (an export's first chunk, whose rows' size
   * nothing tells yet), the statement itself leaves out the rows past the bound by their weight
   * (ROW_WEIGHT), so that the first chunk of large events does not send `limit` of them to be
   * dropped.
   */
  async copyChunk(
    window: ExportWindow,
    after: ExportPosition | null,
    limit: number,
    buffers: ChunkBuffers,
    maxBytes = Number.MAX_SAFE_INTEGER,
    weigh = false,
  ): Promise<Buffer> {
    if (!Number.isSafeInteger(limit) || limit < 1) throw new Error('export: bad chunk size');
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 1) throw new Error('export: bad chunk bytes');
    const sql = weigh ? weighedSql(window, after, limit, maxBytes) : plainSql(window, after, limit);
    return this.read.run((db) =>
      withDriverClient(db, async (client) => {
        let pieces: Buffer[] = [];
        let bytes = 0;
        let full = false;
        for await (const piece of client.query(copyTo(sql))) {
          if (full) continue;
          pieces.push(piece as Buffer);
          bytes += (piece as Buffer).length;
          if (bytes >= maxBytes) {
            pieces = [Buffer.concat(pieces, bytes)];
            full = completeRowsEnd(pieces[0], bytes) !== null;
          }
        }
        // Room for the trailer that ends a cut chunk.
        const copy = buffers.take(bytes + 2);
        let at = 0;
        for (const piece of pieces) at += piece.copy(copy, at);
        if (!full) return copy.subarray(0, bytes);
        const end = completeRowsEnd(copy, bytes)!;
        copy.writeInt16BE(-1, end);
        return copy.subarray(0, end + 2);
      }),
    );
  }
}
