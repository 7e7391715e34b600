import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { READ_DATA_SOURCE } from '@app/database/database.module';

/**
 * The server secrets of the read side: the key that signs the paging cursors of every read
 * endpoint (server_secrets 'cursor') and the key of users' pseudonyms outside Tally ('user_key',
 * see common/user-keys.ts).
 */
@Injectable()
export class CursorSecretRepository {
  private readonly secrets = new Map<string, Promise<Buffer>>();

  constructor(@InjectDataSource(READ_DATA_SOURCE) private readonly db: DataSource) {}

  /** The signing key never changes while the service runs: read once, retried after a failure. */
  cursorSecret(): Promise<Buffer> {
    return this.secret('cursor');
  }

  /** The key of `userKey`s (common/user-keys.ts); like the cursor key, it never changes. */
  userKeySecret(): Promise<Buffer> {
    return this.secret('user_key');
  }

  private secret(name: string): Promise<Buffer> {
    let secret = this.secrets.get(name);
    if (secret === undefined) {
      secret = this.load(name).catch((err: unknown) => {
        this.secrets.delete(name);
        throw err;
      });
      this.secrets.set(name, secret);
    }
    return secret;
  }

  private async load(name: string): Promise<Buffer> {
    const rows = (await this.db.query(`SELECT value FROM server_secrets WHERE name = $1`, [name])) as {
      value: Buffer;
    }[];
    if (!rows.length) throw new Error(`server_secrets has no ${name} row`);
    return rows[0].value;
  }
}
