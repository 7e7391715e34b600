import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { Request, Response } from 'express';
import { isTransientDatabaseError } from '@app/database/transient-error';
import { AppError, ERROR_TITLES, ErrorCode, FieldError } from './app-error';
import { requestIdOf } from './request-id';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';
export const RETRY_AFTER_SECONDS_ON_OUTAGE = 5;

/** The RFC 9457 document every error response carries. */
export interface ProblemDocument {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ErrorCode;
  requestId: string;
  errors?: FieldError[];
  [extra: string]: unknown;
}

// A framework 405 is answered as `not_found` (404): the route does not exist for that method.

export const NOT_FOUND_DETAIL = 'No resource at this path with this method; see /docs for the API.';
function fromHttpException(err: HttpException): AppError {
  const status = err.getStatus();
  const code: ErrorCode =
    status === 404 || status === 405
      ? 'not_found'
      : status === 413
        ? 'payload_too_large'
        : status === 415
          ? 'unsupported_media_type'
          : status === 429
            ? 'rate_limited'
            : status >= 500
              ? 'internal_error'
              : 'invalid_body';
  // A fixed 404 text: echoing the path would repeat a key that a client put in the URL.
  const detail =
    status >= 500 ? ERROR_TITLES.internal_error : code === 'not_found' ? NOT_FOUND_DETAIL : err.message;
  return new AppError(code, detail);
}

/** Turns anything thrown into problem+json. Never leaks stack traces or SQL. */
/**
 * The AppError `err` stands for. What is not the client's doing is logged, with `requestId` (the
 * one the problem document carries) so that a report can be matched to its log line.
 */
export function toAppError(err: unknown, logger?: Logger, requestId?: string): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof HttpException) return fromHttpException(err);
  const of = requestId ? ` (request ${requestId})` : '';
  if (isTransientDatabaseError(err)) {
    logger?.warn(`database unavailable${of}: ${(err as Error).message}`);
    return new AppError('service_unavailable', 'The database is unavailable. Retry later.', {
      headers: { 'Retry-After': String(RETRY_AFTER_SECONDS_ON_OUTAGE) },
    });
  }
  logger?.error(`unexpected error${of}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  return new AppError('internal_error', 'An unexpected error occurred.');
}

export function problemDocument(err: AppError, requestId: string): ProblemDocument {
  const doc: ProblemDocument = {
    type: `urn:tally:problem:${err.code}`,
    title: ERROR_TITLES[err.code],
    status: err.status,
    detail: err.detail,
    code: err.code,
    requestId,
    ...err.options.extra,
  };
  if (err.options.errors) doc.errors = err.options.errors;
  return doc;
}

export function sendProblem(req: Request, res: Response, err: AppError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  for (const [name, value] of Object.entries(err.options.headers ?? {})) res.setHeader(name, value);
  // A 503 always tells the client when to come back.
  if (err.status === 503 && !res.getHeader('Retry-After')) {
    res.setHeader('Retry-After', String(RETRY_AFTER_SECONDS_ON_OUTAGE));
  }
  res
    .status(err.status)
    .type(PROBLEM_CONTENT_TYPE)
    .send(JSON.stringify(problemDocument(err, requestIdOf(req))));
}

@Catch()
export class ProblemFilter implements ExceptionFilter {
  private readonly logger = new Logger('Errors');

  catch(exception: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    const req = ctx.getRequest<Request>();
    sendProblem(req, ctx.getResponse<Response>(), toAppError(exception, this.logger, requestIdOf(req)));
  }
}
