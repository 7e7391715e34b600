import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request } from 'express';

// An incoming X-Request-Id is echoed only when it is short and made of safe characters, so
// that it cannot inject into logs or headers.
const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Picks the request id (a sane incoming one, or a new UUID) and sets X-Request-Id. */
export function assignRequestId(req: IncomingMessage, res: ServerResponse): string {
  const existing = (req as { id?: unknown }).id;
  if (typeof existing === 'string') return existing;
  const incoming = req.headers['x-request-id'];
  const id = typeof incoming === 'string' && SANE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
  (req as { id?: string }).id = id;
  res.setHeader('X-Request-Id', id);
  return id;
}

export function requestIdOf(req: Request): string {
  const id = (req as { id?: unknown }).id;
  return typeof id === 'string' ? id : assignRequestId(req, req.res as ServerResponse);
}
