import { Logger } from '@nestjs/common';
import { Client } from 'pg';

const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 30_000;

export interface ChannelHandlers {
  /** A notification on the channel, with its payload. */
  notified(payload: string): void;
  /** The channel (re)connected: notifications sent while it was down are lost. */
  resubscribed(): void;
}

/**
 * A dedicated PostgreSQL connection that LISTENs on one channel. A pooled connection cannot
 * LISTEN (it is handed to other queries). When the connection drops it is opened again, with a
 * growing delay, until `stop()`. Key revocation and tracking-plan changes each use one.
 */
export class NotificationChannel {
  private readonly logger: Logger;
  private client: Client | null = null;
  private handlers: ChannelHandlers | null = null;
  private retryMs = RETRY_MIN_MS;
  private retryTimer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly databaseUrl: string | undefined,
    private readonly channel: string,
    private readonly label: string,
    /** How the connection shows in pg_stat_activity. */
    private readonly applicationName = 'tally-listen',
  ) {
    this.logger = new Logger(label);
  }

  async start(handlers: ChannelHandlers): Promise<void> {
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
    const client = new Client({ connectionString: this.databaseUrl, application_name: this.applicationName });
    let lost = false;
    const onLost = (err?: Error) => {
      if (lost) return;
      lost = true;
      if (this.client === client) this.client = null;
      client.end().catch(() => undefined);
      if (this.stopped) return;
      this.logger.warn(
        `${this.label} channel lost (${err?.message ?? 'closed'}); retrying in ${this.retryMs} ms`,
      );
      this.retryTimer = setTimeout(() => void this.connect(), this.retryMs);
      this.retryTimer.unref();
      this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
    };
    client.on('error', onLost);
    client.on('end', () => onLost());
    client.on('notification', (msg) => {
      if (msg.channel === this.channel && msg.payload) this.handlers?.notified(msg.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${this.channel}`);
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
