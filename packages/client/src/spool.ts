// The durable queue. Only loaded (dynamically) when `spoolDir` is set, so browsers never see node:fs.
//
// On-disk format (docs/client.md, "Spool"): the directory holds segment files named
// `seg-<16 hex digits>.ndjson`, numbered in creation order. Each line is one event:
//
//   <crc32 of the JSON, 8 lowercase hex digits> <space> <event JSON with its eventId> \n
//
// A line with a wrong checksum, or a last line without its newline (a torn write), ends the
// segment's readable part. A segment receives appends until it holds `segmentEvents` events, then
// is closed; a closed segment is deleted once every event in it has been answered by the server.
// Recovery re-queues every readable event of every segment present: events answered just before
// a crash are sent again and come back as duplicates, never stored twice.
import { mkdir, open, readdir, readFile, unlink } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { join } from 'node:path';

const CRC_TABLE = (() => {
  const t = new Int32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c;
  }
  return t;
})();

/** CRC-32 (IEEE) of the UTF-8 bytes of `bytes`. */
export function crc32(bytes: Uint8Array): number {
  let c = -1;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ -1) >>> 0;
}

const encoder = new TextEncoder();
const SEGMENT = /^seg-([0-9a-f]{16})\.ndjson$/;

export function encodeRecord(json: string): string {
  return crc32(encoder.encode(json)).toString(16).padStart(8, '0') + ' ' + json + '\n';
}

/** The readable records of a segment's text: stops at the first torn or corrupt line. */
export function decodeRecords(text: string): { records: string[]; torn: boolean } {
  const records: string[] = [];
  let at = 0;
  while (at < text.length) {
    const nl = text.indexOf('\n', at);
    if (nl < 0) return { records, torn: true };
    const line = text.slice(at, nl);
    at = nl + 1;
    const json = line.slice(9);
    if (line[8] !== ' ' || line.slice(0, 8) !== crc32(encoder.encode(json)).toString(16).padStart(8, '0')) {
      return { records, torn: true };
    }
    records.push(json);
  }
  return { records, torn: false };
}

export class Segment {
  total = 0;
  written = 0;
  answered = 0;
  /** No more appends (full, or left by an earlier process). */
  full = false;
  /** Full and every record on disk: may be deleted once fully answered. */
  closed = false;
  deleted = false;
  constructor(readonly path: string) {}
}

interface Pending {
  segment: Segment;
  record: string;
  resolve(): void;
  reject(err: unknown): void;
}

export class Spool {
  private current: Segment | undefined;
  private handle: FileHandle | undefined;
  private handleSegment: Segment | undefined;
  private pending: Pending[] = [];
  private writing: Promise<void> | undefined;
  private nextSeq = 0;

  constructor(
    readonly dir: string,
    private readonly segmentEvents: number,
    private readonly onDeleteError: (err: unknown) => void,
  ) {}

  /** Reads every segment left by an earlier process: they are closed, their events re-queued. */
  async recover(): Promise<{ segment: Segment; records: string[] }[]> {
    await mkdir(this.dir, { recursive: true });
    const names = (await readdir(this.dir)).filter((n) => SEGMENT.test(n)).sort();
    const out: { segment: Segment; records: string[] }[] = [];
    for (const name of names) {
      const seq = parseInt(SEGMENT.exec(name)![1], 16);
      this.nextSeq = Math.max(this.nextSeq, seq + 1);
      const segment = new Segment(join(this.dir, name));
      const { records } = decodeRecords(await readFile(segment.path, 'utf8'));
      segment.total = segment.written = records.length;
      segment.full = segment.closed = true;
      if (records.length === 0) await this.remove(segment);
      else out.push({ segment, records });
    }
    return out;
  }

  /** Appends one event; `durable` resolves once it is fsynced (writes are grouped). */
  append(json: string): { segment: Segment; durable: Promise<void> } {
    if (!this.current) {
      const name = `seg-${(this.nextSeq++).toString(16).padStart(16, '0')}.ndjson`;
      this.current = new Segment(join(this.dir, name));
    }
    const segment = this.current;
    segment.total++;
    if (segment.total >= this.segmentEvents) {
      segment.full = true;
      this.current = undefined;
    }
    const durable = new Promise<void>((resolve, reject) =>
      this.pending.push({ segment, record: encodeRecord(json), resolve, reject }),
    );
    this.writing ??= this.writeGroups().finally(() => (this.writing = undefined));
    return { segment, durable };
  }

  /** Writes whatever is pending, one write + one fdatasync per segment per round, until nothing is. */
  private async writeGroups(): Promise<void> {
    // Let the current burst of appends join the first group.
    await new Promise((r) => setImmediate(r));
    while (this.pending.length) {
      const group = this.pending;
      this.pending = [];
      let from = 0;
      while (from < group.length) {
        const segment = group[from].segment;
        let to = from;
        while (to < group.length && group[to].segment === segment) to++;
        const chunk = group.slice(from, to);
        from = to;
        try {
          if (this.handleSegment !== segment) {
            await this.handle?.close();
            this.handle = await open(segment.path, 'a');
            this.handleSegment = segment;
          }
          await this.handle!.write(chunk.map((p) => p.record).join(''));
          await this.handle!.datasync();
          segment.written += chunk.length;
          for (const p of chunk) p.resolve();
        } catch (err) {
          for (const p of chunk) p.reject(err);
        }
        if (segment.full && segment.written >= segment.total) {
          segment.closed = true;
          if (this.handleSegment === segment) {
            await this.handle?.close();
            this.handle = this.handleSegment = undefined;
          }
          this.maybeDelete(segment);
        }
      }
    }
  }

  /** Records that an event of `segment` was answered; deletes a closed, fully answered segment. */
  answered(segment: Segment): void {
    segment.answered++;
    this.maybeDelete(segment);
  }

  private removals = new Set<Promise<void>>();

  private maybeDelete(segment: Segment): void {
    if (segment.closed && !segment.deleted && segment.answered >= segment.total) {
      const removal = this.remove(segment).finally(() => this.removals.delete(removal));
      this.removals.add(removal);
    }
  }

  private async remove(segment: Segment): Promise<void> {
    segment.deleted = true;
    try {
      await unlink(segment.path);
    } catch (err) {
      if ((err as { code?: string }).code !== 'ENOENT') this.onDeleteError(err);
    }
  }

  /** Waits for pending writes and closes the file. Unanswered segments stay on disk for the next start. */
  async close(): Promise<void> {
    while (this.writing) await this.writing;
    await this.handle?.close();
    this.handle = this.handleSegment = undefined;
    const cur = this.current;
    this.current = undefined;
    if (cur) {
      cur.full = cur.closed = true;
      this.maybeDelete(cur);
    }
    await Promise.all(this.removals);
  }
}
