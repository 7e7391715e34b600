import type { Params } from 'nestjs-pino';
import type { DestinationStream } from 'pino';
import type { AppConfig } from '@app/config/config';
import { assignRequestId } from './request-id';

// A client that puts its key in the URL by mistake must not have it written to the logs.
const KEY_IN_URL = /tly_(live|test|api)_[0-9A-Za-z]+/gi;
const PERCENT_ESCAPE = /%[0-9A-Fa-f]{2}/;

/** Decodes percent-escapes, even in a URL that is not valid percent-encoding as a whole. */
function decodeLeniently(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    // Only ASCII escapes matter for a key; other bytes stay encoded.
    return s.replace(/%([0-7][0-9A-Fa-f])/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  }
}

/**
 * The URL as logged: percent-decoded (repeatedly, since a double-encoded key is still a key), then
 * with every key masked, and cut to 512 characters.
 */
export function loggableUrl(url: unknown): unknown {
  if (typeof url !== 'string') return url;
  let decoded = url.slice(0, 8192);
  for (let i = 0; i < 3 && PERCENT_ESCAPE.test(decoded); i++) decoded = decodeLeniently(decoded);
  return decoded.replace(KEY_IN_URL, 'tly_$1_[redacted]').slice(0, 512);
}

/**
 * One JSON line per request, with the request id; credentials are never written. Lines go to
 * stdout unless `destination` is given (the tests capture them there).
 */
export function loggerOptions(config: AppConfig, destination?: DestinationStream): Params {
  const options: Exclude<Params['pinoHttp'], DestinationStream | unknown[] | undefined> = {
    level: config.logLevel,
    genReqId: (req, res) => assignRequestId(req, res),
    redact: {
      paths: ['req.headers.authorization', 'req.headers.cookie', 'req.headers["x-api-key"]'],
      censor: '[redacted]',
    },
    serializers: {
      req: (req: { id: string; method: string; url: string; headers: Record<string, unknown> }) => ({
        id: req.id,
        method: req.method,
        url: loggableUrl(req.url),
        headers: {
          authorization: req.headers.authorization,
          'content-type': req.headers['content-type'],
          'content-encoding': req.headers['content-encoding'],
          'content-length': req.headers['content-length'],
        },
      }),
      res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
    },
    customLogLevel: (_req, res, err) =>
      err || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'warn' : 'info',
  };
  return {
    // nestjs-pino's request middleware runs on no route: request-log.ts writes the request line
    // of every route through the root logger this builds. The middleware would give each request
    // a child logger and an AsyncLocalStorage context, and the first `run()` of such a context
    // turns on Node's promise hooks for the whole process, which then cost every promise of
    // every request (about 4 % of the server's CPU on ingest). Log lines written while a request
    // is served carry its id in their text instead (problem.filter.ts).
    forRoutes: [],
    pinoHttp: destination ? [options, destination] : options,
  };
}
