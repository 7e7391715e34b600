import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '@app/config/config';
import { NotificationChannel } from '@app/database/notification-channel';
import { KEY_REVOKED_CHANNEL } from './key.repository';

export interface RevocationHandlers {
  /** A key was revoked (on any instance, or by the CLI). */
  revoked(keyId: string): void;
  /** The channel (re)connected: notifications sent while it was down are lost. */
  resubscribed(): void;
}

/**
 * A dedicated PostgreSQL connection that LISTENs for key revocations (see NotificationChannel:
 * reopened with a growing delay when it drops, until `stop()`).
 */
@Injectable()
export class KeyRevocationRepository {
  private readonly channel: NotificationChannel;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.channel = new NotificationChannel(config.databaseUrl, KEY_REVOKED_CHANNEL, 'KeyRevocation');
  }

  start(handlers: RevocationHandlers): Promise<void> {
    return this.channel.start({ notified: handlers.revoked, resubscribed: handlers.resubscribed });
  }

  stop(): Promise<void> {
    return this.channel.stop();
  }
}
