import { userKey } from '@app/common/user-keys';

/** Distinct users an export remembers the keys of before it starts over (about 6 MB). */
const REMEMBERED = 50_000;

/**
 * The `userKey` of each exported record (common/user-keys.ts), from the user id's bytes in a
 * chunk's COPY. An export meets the same users again and again, so each user's key is computed
 * once and its bytes (`"<key>"`, quoted for NDJSON) are shared by every record of that user: the
 * Parquet writer's dictionary, keyed by object, then holds one entry per user.
 */
export class ExportUserKeys {
  private readonly known = new Map<string, Buffer>();

  constructor(
    private readonly secret: Buffer,
    private readonly appId: string,
  ) {}

  /** The key of the user id in bytes [from, from + length) of `copy`, as ASCII bytes. */
  keyOf(copy: Buffer, from: number, length: number): Buffer {
    const id = copy.toString('utf8', from, from + length);
    let key = this.known.get(id);
    if (key === undefined) {
      if (this.known.size >= REMEMBERED) this.known.clear();
      key = Buffer.from(userKey(this.secret, this.appId, id), 'latin1');
      this.known.set(id, key);
    }
    return key;
  }
}
