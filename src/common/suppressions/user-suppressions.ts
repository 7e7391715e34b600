import { Injectable } from '@nestjs/common';
import { createHmac } from 'node:crypto';

/**
 * The keyed hash under which a suppressed user is stored and matched: HMAC-SHA256 of the app id
 * and the stored (possibly pseudonymised) user id, keyed with the `suppression` server secret.
 * The app id is part of the message, so the same id in two apps gives two unrelated hashes.
 */
export function suppressionHash(key: Buffer, appId: string, userId: string): Buffer {
  return createHmac('sha256', key).update(appId).update('\n').update(userId).digest();
}

/** User ids whose answer one app's matcher remembers (about 1 MB at most). */
const MATCHER_MEMO = 10_000;

/** Tests a stored user id against one app's suppressions. */
export type SuppressionMatcher = (userId: string) => boolean;

/**
 * This instance's copy of the suppression list: app id → hex hashes. Ingest asks it once per
 * request for the app's matcher; an app without suppressions gets `null` and its events pay
 * nothing more. The privacy module fills it at boot and keeps it current from notifications, so
 * ingest never queries the database for it. It lives in `common` so that ingest needs no arrow
 * to the privacy module.
 */
@Injectable()
export class UserSuppressions {
  private key: Buffer | null = null;
  private readonly byApp = new Map<string, Set<string>>();
  private readonly matchers = new Map<string, SuppressionMatcher>();
  private suppressed = 0;

  /** The HMAC key; until it is set, nothing is suppressed. */
  setKey(key: Buffer): void {
    this.key = key;
    this.matchers.clear();
  }

  /** Replaces one app's list (hex hashes). */
  replaceApp(appId: string, hashes: string[]): void {
    this.matchers.delete(appId);
    if (hashes.length === 0) this.byApp.delete(appId);
    else this.byApp.set(appId, new Set(hashes));
  }

  /** Replaces every app's list. */
  replaceAll(byApp: Map<string, string[]>): void {
    this.byApp.clear();
    this.matchers.clear();
    for (const [appId, hashes] of byApp) this.replaceApp(appId, hashes);
  }

  /** The app's matcher, or null when the app has no suppressed user. */
  matcher(appId: string): SuppressionMatcher | null {
    const key = this.key;
    if (key === null || !this.byApp.has(appId)) return null;
    let match = this.matchers.get(appId);
    if (match === undefined) {
      const hashes = this.byApp.get(appId)!;
      // Most events come from users seen shortly before: remember their answers rather than
      // compute an HMAC per event. A change of the app's list builds a new matcher.
      const seen = new Map<string, boolean>();
      match = (userId) => {
        let hit = seen.get(userId);
        if (hit === undefined) {
          hit = hashes.has(suppressionHash(key, appId, userId).toString('hex'));
          if (seen.size >= MATCHER_MEMO) seen.clear();
          seen.set(userId, hit);
        }
        return hit;
      };
      this.matchers.set(appId, match);
    }
    return match;
  }

  /** Counts events refused because their user is suppressed (read by the metrics). */
  countSuppressed(n: number): void {
    this.suppressed += n;
  }

  get suppressedEvents(): number {
    return this.suppressed;
  }
}
