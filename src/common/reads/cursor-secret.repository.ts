import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { READ_DATA_SOURCE } from '@app/database/database.module';

/** The key that signs the paging cursors of every read endpoint (server_secrets 'cursor'). */
@Injectable()
export class CursorSecretRepository {
  private secret: Promise<Buffer> | null = null;

  constructor(@InjectDataSource(READ_DATA_SOURCE) private readonly db: DataSource) {}

  /** The signing key never changes while the service runs: read once, retried after a failure. */
  cursorSecret(): Promise<Buffer> {
    this.secret ??= this.load().catch((err: unknown) => {
      this.secret = null;
      throw err;
    });
    return this.secret;
  }

  private async load(): Promise<Buffer> {
    const rows = (await this.db.query(`SELECT value FROM server_secrets WHERE name = 'cursor'`)) as {
      value: Buffer;
    }[];
    if (!rows.length) throw new Error('server_secrets has no cursor row');
    return rows[0].value;
  }
}
