import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { Interval } from '@nestjs/schedule';
import { KeyVerifier } from './key-verifier';

const LAST_USED_FLUSH_MS = 5_000;

/**
 * Writes the keys' batched last-used times every LAST_USED_FLUSH_MS, and once more when the
 * service stops. A class of its own so that KeyVerifier, which the admin CLI also builds, loads
 * no scheduler.
 */
@Injectable()
export class KeyUsageFlusher implements OnModuleDestroy {
  constructor(private readonly verifier: KeyVerifier) {}

  @Interval('key-last-used', LAST_USED_FLUSH_MS)
  flush(): Promise<void> {
    return this.verifier.flushLastUsed();
  }

  onModuleDestroy(): Promise<void> {
    return this.verifier.flushLastUsed();
  }
}
