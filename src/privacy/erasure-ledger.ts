import { Logger } from '@nestjs/common';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { AuditActor } from '@app/audit/audit.types';
import type { DeletionKind, DeletionRow } from './deletion.repository';

/**
 * One finished deletion, as one line of the ledger. It names users by pseudonym only: the hex
 * HMAC under which the suppression list keeps a user (common/suppressions, keyed with the
 * `suppression` server secret), which a restored database can match against its stored ids but
 * which cannot be turned back into an id. An app's deletion names no users.
 */
export interface LedgerEntry {
  deletionId: string;
  appId: string;
  kind: DeletionKind;
  /** When the deletion ended (ISO 8601). */
  at: string;
  userHashes: string[];
  suppress: boolean;
  requestedBy: AuditActor;
}

/** The `beforeDone` hook of the deletion job: the entry of a deletion about to be `done`. */
export function ledgerEntry(
  ledger: ErasureLedger,
  suppressions: { hashesOf(appId: string, storedIds: string[]): Promise<string[]> },
): (row: DeletionRow) => Promise<void> {
  return async (row) => {
    const hashes = row.kind === 'app' ? [] : await suppressions.hashesOf(row.appId, row.userIds ?? []);
    await ledger.record(row, hashes);
  };
}

/** What a read of the ledger found. */
export interface LedgerContents {
  /** One entry per deletion id, in the order they were appended. */
  entries: LedgerEntry[];
  /** Lines that are not an entry (a torn last line after a crash, or damage), skipped. */
  skippedLines: number;
}

function parseEntry(line: string): LedgerEntry | null {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  const e = value as Partial<LedgerEntry> | null;
  if (
    !e ||
    typeof e.deletionId !== 'string' ||
    typeof e.appId !== 'string' ||
    typeof e.at !== 'string' ||
    (e.kind !== 'users' && e.kind !== 'app') ||
    !Array.isArray(e.userHashes) ||
    !e.userHashes.every((u) => typeof u === 'string' && /^[0-9a-f]{64}$/.test(u)) ||
    typeof e.suppress !== 'boolean' ||
    typeof e.requestedBy !== 'object' ||
    e.requestedBy === null
  ) {
    return null;
  }
  return e as LedgerEntry;
}

/**
 * The erasure ledger (ERASURE_LEDGER_PATH): an append-only NDJSON file, outside the database, of
 * every deletion that ended `done`. A deletion is appended and fsynced before the database says
 * it is done, so a backup restored later can be brought back to every erasure made since.
 */
export class ErasureLedger {
  private readonly logger = new Logger('ErasureLedger');
  /** Deletion ids known to be in the file (read or appended by this process). */
  private readonly known = new Set<string>();

  constructor(readonly file: string) {}

  /**
   * Appends a deletion that is about to be `done`, with its users' pseudonyms (`userHashes`, see
   * LedgerEntry), and fsyncs it; a no-op when it is already there.
   */
  async record(row: DeletionRow, userHashes: string[], at = Date.now()): Promise<void> {
    if (this.known.has(row.id)) return;
    const entry: LedgerEntry = {
      deletionId: row.id,
      appId: row.appId,
      kind: row.kind,
      at: new Date(at).toISOString(),
      userHashes,
      suppress: row.suppress,
      requestedBy: row.requestedBy,
    };
    await this.append(entry);
    this.known.add(row.id);
  }

  private async append(entry: LedgerEntry): Promise<void> {
    const created = await this.ensureFolder();
    const handle = await fs.open(this.file, 'a+', 0o600);
    try {
      const { size } = await handle.stat();
      // A crash in the middle of an append leaves a line without its newline: end it, so that the
      // torn line stays one skipped line and this entry is whole.
      let prefix = '';
      if (size > 0) {
        const last = Buffer.alloc(1);
        await handle.read(last, 0, 1, size - 1);
        if (last[0] !== 0x0a) prefix = '\n';
      }
      await handle.write(`${prefix}${JSON.stringify(entry)}\n`);
      await handle.sync();
    } finally {
      await handle.close();
    }
    if (created) await this.syncFolder();
  }

  /** Creates the ledger's folder when missing; true when the file is new. */
  private async ensureFolder(): Promise<boolean> {
    await fs.mkdir(path.dirname(this.file), { recursive: true, mode: 0o700 });
    return fs.access(this.file).then(
      () => false,
      () => true,
    );
  }

  /** Makes the file's entry in its folder durable (a new file is not, until its folder is synced). */
  private async syncFolder(): Promise<void> {
    const dir = await fs.open(path.dirname(this.file), 'r');
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  }

  /** Every entry in the file; a missing file is an empty ledger. */
  async read(): Promise<LedgerContents> {
    let text: string;
    try {
      text = await fs.readFile(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { entries: [], skippedLines: 0 };
      throw err;
    }
    const byId = new Map<string, LedgerEntry>();
    let skippedLines = 0;
    const lines = text.split('\n');
    lines.forEach((line, i) => {
      if (line.trim() === '') return;
      const entry = parseEntry(line);
      if (entry === null) {
        skippedLines++;
        const torn = i === lines.length - 1;
        this.logger.warn(`${this.file}:${i + 1}: ${torn ? 'torn last line' : 'not a ledger entry'}, skipped`);
        return;
      }
      if (!byId.has(entry.deletionId)) byId.set(entry.deletionId, entry);
      this.known.add(entry.deletionId);
    });
    return { entries: [...byId.values()], skippedLines };
  }
}
