import { Inject, Injectable, Logger } from '@nestjs/common';
import { Client } from 'pg';
import { APP_CONFIG, AppConfig } from '@app/config/config';
import { KEY_REVOKED_CHANNEL } from './key.repository';

const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 30_000;

export interface RevocationHandlers {
  /** A key was revoked (on any instance, or by the CLI). */
  revoked(keyId: string): void;
  /** The channel (re)connected: notifications sent while it was down are lost. */
  resubscribed(): void;
}

/**
 * A dedicated PostgreSQL connection that LISTENs for key revocations. A pooled connection
 * cannot LISTEN (it is handed to other queries). When the connection drops it is opened again,
 * with a growing delay, until `stop()`.
 */
@Injectable()
export class KeyRevocationRepository {
  private readonly logger = new Logger('KeyRevocation');
  private client: Client | null = null;
  private handlers: RevocationHandlers | null = null;
  private retryMs = RETRY_MIN_MS;
  private retryTimer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  async start(handlers: RevocationHandlers): Promise<void> {
    this.handlers = handlers;
    this.stopped = false;
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    this.retryTimer = null;
    if (this.stopped) return;
    const client = new Client({
      connectionString: this.config.databaseUrl,
      application_name: 'tally-listen',
    });
    let lost = false;
    const onLost = (err?: Error) => {
      if (lost) return;
      lost = true;
      if (this.client === client) this.client = null;
      client.end().catch(() => undefined);
      if (this.stopped) return;
      this.logger.warn(
        `revocation channel lost (${err?.message ?? 'closed'}); retrying in ${this.retryMs} ms`,
      );
      this.retryTimer = setTimeout(() => void this.connect(), this.retryMs);
      this.retryTimer.unref();
      this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
    };
    client.on('error', onLost);
    client.on('end', () => onLost());
    client.on('notification', (msg) => {
      if (msg.channel === KEY_REVOKED_CHANNEL && msg.payload) this.handlers?.revoked(msg.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${KEY_REVOKED_CHANNEL}`);
    } catch (err) {
      onLost(err as Error);
      return;
    }
    if (this.stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.retryMs = RETRY_MIN_MS;
    this.handlers?.resubscribed();
  }
}
