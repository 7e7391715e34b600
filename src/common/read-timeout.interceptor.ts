import { CallHandler, Injectable, NestInterceptor } from '@nestjs/common';
import { catchError, Observable, throwError } from 'rxjs';
import { isStatementTimeout } from '@app/database/transient-error';
import { AppError } from './app-error';
import { RETRY_AFTER_SECONDS_ON_OUTAGE } from './problem.filter';

/**
 * Answers a read cancelled by READ_STATEMENT_TIMEOUT_MS with 503 `query_timeout`: the request
 * is valid and may succeed on a quieter database, but as it stands it costs too much. Elsewhere
 * (ingest) a statement timeout stays a plain 503 `service_unavailable`.
 */
@Injectable()
export class ReadTimeoutInterceptor implements NestInterceptor {
  intercept(_context: unknown, next: CallHandler): Observable<unknown> {
    return next
      .handle()
      .pipe(
        catchError((err: unknown) =>
          throwError(() =>
            isStatementTimeout(err)
              ? new AppError(
                  'query_timeout',
                  'The query took longer than the server allows and was cancelled; nothing is wrong with ' +
                    'the request. Narrow the time range (from/to) or add filters, or retry later.',
                  { headers: { 'Retry-After': String(RETRY_AFTER_SECONDS_ON_OUTAGE) } },
                )
              : err,
          ),
        ),
      );
  }
}
