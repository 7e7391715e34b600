/** Percent-encodes the UTF-8 bytes of a value (a lone surrogate becomes U+FFFD, as in a browser). */
export function percentEncode(v: string): string;
/** Raw query fragments, sent as they are: broken percent-encoding, non-UTF-8 bytes and the like. */
export const RAW_QUERY_FRAGMENTS: readonly string[];
