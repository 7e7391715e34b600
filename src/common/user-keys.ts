import { createHmac } from 'node:crypto';

/**
 * A user's pseudonym outside Tally (`userKey`): an HMAC-SHA256 of the app and the stored
 * `anonymousUserId`, keyed with the `user_key` server secret, as 22 characters of base64url.
 * The same user of the same app always gets the same key, another app gets another, and no key
 * can be turned back into the id. Exported records carry it, and a finished deletion lists its
 * users' keys, so that copies of the data elsewhere can be erased without a raw id.
 */
export function userKey(secret: Buffer, appId: string, anonymousUserId: string): string {
  return createHmac('sha256', secret)
    .update(appId)
    .update('\n')
    .update(anonymousUserId)
    .digest()
    .subarray(0, 16)
    .toString('base64url');
}
