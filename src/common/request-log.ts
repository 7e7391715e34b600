import type { IncomingMessage, ServerResponse } from 'node:http';
import { PinoLogger } from 'nestjs-pino';

type Level = 'error' | 'warn' | 'info';

/**
 * The request line of the ingest route: one JSON line per request, written when the response
 * ends, through the application's root logger (same stream, serializers and redaction as the
 * other routes' lines, which nestjs-pino writes). Ingest is served without nestjs-pino's
 * per-request child logger and async context: a child logger serializes the request's bindings
 * on every request, even when its line is below the log level. Here nothing is built unless the
 * line is written.
 */
export function logIngestRequest(req: IncomingMessage, res: ServerResponse): void {
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
