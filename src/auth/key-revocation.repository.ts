import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, ConfigSlice } from '@app/config/config';
import { PgListener } from '@app/common/pg-listener';
import { KEY_REVOKED_CHANNEL } from './key.repository';

export interface RevocationHandlers {
  /** A key was revoked (on any instance, or by the CLI). */
  revoked(keyId: string): void;
  /** The channel (re)connected: notifications sent while it was down are lost. */
  resubscribed(): void;
}

/** The connection that LISTENs for key revocations (reopened when it drops, until `stop()`). */
@Injectable()
export class KeyRevocationRepository {
  private readonly listener: PgListener;

  constructor(@Inject(APP_CONFIG) config: ConfigSlice<'databaseUrl'>) {
    this.listener = new PgListener(config.databaseUrl, [KEY_REVOKED_CHANNEL], 'KeyRevocation');
  }

  start(handlers: RevocationHandlers): Promise<void> {
    return this.listener.start({
      notified: (_channel, keyId) => {
        if (keyId) handlers.revoked(keyId);
      },
      resubscribed: () => handlers.resubscribed(),
    });
  }

  stop(): Promise<void> {
    return this.listener.stop();
  }
}
