import type { Response } from 'express';

/**
 * Names the next page of a paged read: `Link: <path?…&cursor=…>; rel="next"`, which repeats the
 * query's parameters, and `X-Next-Cursor`. Nothing on the last page (`cursor` null).
 */
export function setNextPageHeaders(res: Response, path: string, query: object, cursor: string | null): void {
  if (cursor === null) return;
  const next = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (name !== 'cursor' && value !== undefined) next.set(name, String(value));
  }
  next.set('cursor', cursor);
  res.setHeader('Link', `<${path}?${next.toString()}>; rel="next"`);
  res.setHeader('X-Next-Cursor', cursor);
}
