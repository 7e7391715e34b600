import type { SuppressionMatcher } from '@app/common/suppressions/user-suppressions';
import type { PiiPolicy } from './ingest.types';

/** What the per-event rules need to know about the request. */
export interface EventRules {
  /** The request's receive time, epoch ms. */
  receivedAt: number;
  /** Added to every `eventTime` (the client clock correction); 0 for none. */
  skewMs: number;
  /** Effective times before this are `event_too_old`. */
  oldestTs: number;
  maxEventBytes: number;
  piiPolicy: PiiPolicy;
  /** A test key makes every event a test event. */
  forceTestMode: boolean;
  /** Replaces an email or phone user id with a stable pseudonym. */
  pseudonymise(kind: 'email' | 'phone', value: string): string;
  /** The most errors, and the most warnings, the response lists; all are counted. Default: all. */
  maxIssuesListed?: number;
  /** The app's suppressed users (matched on the stored user id); null or absent when none. */
  suppressed?: SuppressionMatcher | null;
}
