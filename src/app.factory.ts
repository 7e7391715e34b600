import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { Logger } from 'nestjs-pino';
import helmet from 'helmet';
import compression from 'compression';
import type { CorsOptionsCallback } from '@nestjs/common/interfaces/external/cors-options.interface';
import type { Request, Response } from 'express';
import type { AppConfig } from './config/config';
import { AppModule, AppOptions } from './app.module';
import { AppError } from './common/app-error';
import { ProblemFilter, sendProblem } from './common/problem.filter';
import { assignRequestId } from './common/request-id';
import { logRequest } from './common/request-log';
import { setupOpenApi } from './ops/openapi';
import { answerNodeErrorsAsProblems } from './common/node-http-errors';

const INGEST_PATH = /^\/api\/(ingest|segment\/v1|posthog)(\/|\?|$)/;
const DOCS_PATH_PATTERN = /^\/docs(\/|$)/;
const DASHBOARD_PATH_PATTERN = /^\/dashboard(\/|$)/;
const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/** Compresses JSON answers over 1 KiB for clients that accept it; nothing else (not /metrics). */
const compressJson = compression({
  threshold: 1024,
  filter: (req, res) =>
    JSON_TYPE.test(String(res.getHeader('Content-Type') ?? '')) && compression.filter(req, res),
});

/**
 * Node keeps only the first of several Authorization headers; a request with two is ambiguous
 * (which key did the client mean?), so it is refused rather than guessed.
 */
function hasDuplicateAuthorization(req: Request): boolean {
  return (req.headersDistinct.authorization?.length ?? 0) > 1;
}

/**
 * Strict-Transport-Security only on a request that came over HTTPS: a TLS socket, or, behind a
 * TLS-terminating proxy trusted by TRUST_PROXY, `X-Forwarded-Proto: https` (Express's
 * `req.secure`). Over plain HTTP the header means nothing to a browser (RFC 6797 §7.2) and
 * would only advertise a policy the client did not get.
 */
function hstsOverHttps(req: Request, res: Response): void {
  if (req.secure) res.setHeader('Strict-Transport-Security', 'max-age=31536000; includeSubDomains');
}

/** Builds the configured Nest application. The server, the tests and the benchmark share it. */
export async function createApp(
  config: AppConfig,
  options: AppOptions = {},
): Promise<NestExpressApplication> {
  const app = await NestFactory.create<NestExpressApplication>(AppModule.forRoot(config, options), {
    // The ingest body is read by the ingest module itself (size limits, gzip); nothing else takes one.
    bodyParser: false,
    bufferLogs: true,
  });
  app.useLogger(app.get(Logger));
  app.set('trust proxy', config.trustProxy);
  app.disable('x-powered-by');
  app.disable('etag');
  app.use(prepareRequest);
  app.use(compressJson);
  app.use(securityHeaders());
  app.enableCors(corsForIngestOnly);
  app.useGlobalFilters(new ProblemFilter());
  setupOpenApi(app);
  boundSlowClients(app.getHttpServer() as import('node:http').Server);
  return app;
}

/** Gives every request its id and log line, forbids caching, and refuses an ambiguous key. */
function prepareRequest(req: Request, res: Response, next: () => void): void {
  assignRequestId(req, res);
  logRequest(req, res);
  // Answers carry tenant data or state that changes: no cache may keep them.
  res.setHeader('Cache-Control', 'no-store');
  if (hasDuplicateAuthorization(req)) {
    sendProblem(
      req,
      res,
      new AppError('invalid_header', 'The request carries more than one Authorization header.'),
    );
    return;
  }
  next();
}

/**
 * Helmet headers by area: the API answers JSON only, so its CSP forbids everything; the reference
 * at /docs loads swagger-ui's own scripts and styles (it uses inline styles) from this origin; the
 * dashboard loads only its own bundled script and stylesheets (no inline script or style).
 */
function securityHeaders(): (req: Request, res: Response, next: (err?: unknown) => void) => void {
  const apiHelmet = helmet({
    contentSecurityPolicy: {
      useDefaults: false,
      directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] },
    },
    crossOriginResourcePolicy: false,
    // Sent by hstsOverHttps, over HTTPS only.
    strictTransportSecurity: false,
  });
  const docsHelmet = helmet({
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'self'"],
        scriptSrc: ["'self'"],
        styleSrc: ["'self'", "'unsafe-inline'"],
        imgSrc: ["'self'", 'data:'],
        connectSrc: ["'self'"],
        objectSrc: ["'none'"],
        frameAncestors: ["'none'"],
      },
    },
    crossOriginResourcePolicy: false,
    // Sent by hstsOverHttps, over HTTPS only.
    strictTransportSecurity: false,
  });
  const dashboardHelmet = helmet({
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'self'"],
        scriptSrc: ["'self'"],
        styleSrc: ["'self'"],
        imgSrc: ["'self'"],
        connectSrc: ["'self'"],
        objectSrc: ["'none'"],
        baseUri: ["'none'"],
        formAction: ["'none'"],
        frameAncestors: ["'none'"],
      },
    },
    crossOriginResourcePolicy: false,
    // Sent by hstsOverHttps, over HTTPS only.
    strictTransportSecurity: false,
    referrerPolicy: { policy: 'no-referrer' },
  });
  return (req, res, next) => {
    hstsOverHttps(req, res);
    const guard = DOCS_PATH_PATTERN.test(req.path)
      ? docsHelmet
      : DASHBOARD_PATH_PATTERN.test(req.path)
        ? dashboardHelmet
        : apiHelmet;
    guard(req, res, next);
  };
}

/**
 * Ingest keys are public by nature (they ship inside apps), so ingest answers any origin.
 * The read endpoints send no CORS headers: browsers must not call them.
 */
function corsForIngestOnly(req: Request, callback: CorsOptionsCallback): void {
  if (INGEST_PATH.test(req.url)) {
    callback(null, {
      origin: '*',
      methods: ['POST', 'OPTIONS'],
      allowedHeaders: ['Authorization', 'Content-Type', 'Content-Encoding', 'X-Request-Id'],
      exposedHeaders: [
        'X-Request-Id',
        'Retry-After',
        'RateLimit-Limit',
        'RateLimit-Remaining',
        'RateLimit-Reset',
      ],
      maxAge: 86_400,
    });
  } else {
    callback(null, { origin: false });
  }
}

/**
 * Bound slow clients (slowloris): headers within 20 s, the whole request within 60 s. The
 * largest ingest body (1 MiB by default) needs far less even on a poor mobile link. Node
 * checks these every connectionsCheckingInterval (30 s by default, so a 20 s limit cut at up
 * to 50 s); once a second keeps each within a second of its value. Read at listen time.
 * docs/security.md has the table of every timeout.
 */
function boundSlowClients(server: import('node:http').Server): void {
  server.headersTimeout = 20_000;
  server.requestTimeout = 60_000;
  // A public property of Node's server that its type declarations omit.
  (server as typeof server & { connectionsCheckingInterval: number }).connectionsCheckingInterval = 1_000;
  answerNodeErrorsAsProblems(server);
}
