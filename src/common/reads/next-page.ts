import type { Response } from 'express';

/**
 * The headers of a paged listing that has more: `Link: <path?…&cursor=…>; rel="next"` (the same
 * query with the new cursor) and `X-Next-Cursor`.
 */
export function setNextPage(res: Response, path: string, query: object, nextCursor: string | null): void {
  if (!nextCursor) return;
  const next = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (name !== 'cursor' && value !== undefined) next.set(name, String(value));
  }
  next.set('cursor', nextCursor);
  res.setHeader('Link', `<${path}?${next.toString()}>; rel="next"`);
  res.setHeader('X-Next-Cursor', nextCursor);
}
