import type { IncomingMessage, ServerResponse } from 'node:http';
import { PinoLogger } from 'nestjs-pino';

type Level = 'error' | 'warn' | 'info';

/**
 * The request line of every route: one JSON line per request, written when the response ends,
 * through the application's root logger (its stream, serializers and redaction; see logger.ts).
 * Nothing is built unless the line is written, and no per-request logger or async context is
 * made.
 */
export function logRequest(req: IncomingMessage, res: ServerResponse): void {
  const started = performance.now();
  const done = () => {
    res.off('finish', done);
    res.off('close', done);
    const root = PinoLogger.root;
    const status = res.writableFinished ? res.statusCode : 499;
    const level: Level = status >= 500 ? 'error' : status >= 400 ? 'warn' : 'info';
    if (!root?.isLevelEnabled(level)) return;
    const responseTime = Math.round(performance.now() - started);
    root[level](
      { req, res, responseTime },
      status === 499 ? 'request aborted' : status >= 500 ? 'request errored' : 'request completed',
    );
  };
  res.on('finish', done);
  res.on('close', done);
}
