import type { Request } from 'express';
import { AppError } from '@app/common/app-error';
import type { IngestMode, KeyKind } from './key.entity';

/** What a key guard attaches to the request after a successful check. */
export interface RequestKey {
  id: string;
  kind: KeyKind;
  mode: IngestMode | null;
  appIds: string[];
  scopes: string[];
  /** An ingest key's app time zone, from the key cache (at most KEY_CACHE_TTL_MS old). */
  timezone?: string;
}

const KEY = Symbol('tally.key');

export function attachKey(req: Request, key: RequestKey): void {
  (req as unknown as Record<symbol, RequestKey>)[KEY] = key;
}

/** The key of a request that passed a key guard. */
export function requestKey(req: Request): RequestKey {
  const key = (req as unknown as Record<symbol, RequestKey | undefined>)[KEY];
  if (!key) throw new AppError('internal_error', 'Route has no key guard.');
  return key;
}

export function bearerToken(req: Request): string | null {
  const header = req.headers.authorization;
  if (typeof header !== 'string') return null;
  const match = /^Bearer[ ]+([^\s]+)\s*$/i.exec(header);
  return match ? match[1] : null;
}
