import { Injectable, NestMiddleware } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import { MetricsService } from '@app/common/metrics/metrics.service';
import { DrainState } from './drain-state';

// Requests that matched no route are counted under one label, so that scanners probing random
// URLs cannot blow up the number of time series.
const UNMATCHED_ROUTE = 'unmatched';

type RouteHolder = { route?: { path?: unknown } };

// Nest mounts this middleware as a catch-all route of its own, so `req.route` is that route until
// a controller's route matches; `mounted` is the one seen on entry.
function routeTemplate(req: Request, mounted: unknown): string {
  const route = (req as RouteHolder).route;
  if (!route || route === mounted || typeof route.path !== 'string') return UNMATCHED_ROUTE;
  return `${req.baseUrl ?? ''}${route.path}` || '/';
}

/** Counts every request by method, route template and status, and times it. */
@Injectable()
export class HttpMetricsMiddleware implements NestMiddleware {
  constructor(
    private readonly metrics: MetricsService,
    private readonly drain: DrainState,
  ) {}

  use(req: Request, res: Response, next: NextFunction): void {
    const started = process.hrtime.bigint();
    const mounted = (req as RouteHolder).route;
    if (this.drain.draining) res.setHeader('Connection', 'close');
    let done = false;
    const record = () => {
      if (done) return;
      done = true;
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      // 499 (client closed) is what the request amounted to when the client hung up first.
      const status = res.writableFinished ? res.statusCode : 499;
      this.metrics.observeHttp(req.method, routeTemplate(req, mounted), status, seconds);
    };
    res.once('finish', record);
    res.once('close', record);
    next();
  }
}
