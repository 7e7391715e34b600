import { Injectable, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { KeyRevocationRepository } from './key-revocation.repository';
import { KeyVerifier } from './key-verifier';

/**
 * Drops a revoked key from this instance's key cache as soon as any instance (or the CLI)
 * revokes it. The cache TTL stays the fallback for a notification missed while the channel
 * was down; on reconnecting, the whole cache is dropped for the same reason.
 */
@Injectable()
export class KeyRevocationListener implements OnApplicationBootstrap, OnApplicationShutdown {
  constructor(
    private readonly channel: KeyRevocationRepository,
    private readonly keys: KeyVerifier,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.channel.start({
      revoked: (keyId) => this.keys.forgetCached(keyId),
      resubscribed: () => this.keys.forgetAllCached(),
    });
  }

  async onApplicationShutdown(): Promise<void> {
    await this.channel.stop();
  }
}
