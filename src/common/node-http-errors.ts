import { randomUUID } from 'node:crypto';
import { maxHeaderSize, STATUS_CODES } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { AppError } from './app-error';
import { PROBLEM_CONTENT_TYPE, problemDocument } from './problem.filter';

/**
 * What Node's HTTP parser refused, as an AppError: a request whose headers (the URL included)
 * exceed the server's header size limit, one that took too long to arrive, or one that is not
 * HTTP/1.1 at all.
 */
export function clientErrorProblem(err: NodeJS.ErrnoException, maxHeaderBytes: number): AppError {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return new AppError(
        'headers_too_large',
        `The request line and headers exceed ${maxHeaderBytes} bytes; send a shorter URL or fewer headers.`,
      );
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new AppError('request_timeout', 'The request did not arrive in time; the connection is closed.');
    default:
      return new AppError('malformed_request', 'The request is not valid HTTP/1.1.');
  }
}

const PROBLEM_HEADERS = {
  'Content-Type': PROBLEM_CONTENT_TYPE,
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
};

/** The whole HTTP response for `err`, written straight to a socket that Node gave up on. */
function rawProblem(err: AppError): string {
  const requestId = randomUUID();
  const body = JSON.stringify(problemDocument(err, requestId));
  const headers = {
    ...PROBLEM_HEADERS,
    'Content-Length': Buffer.byteLength(body),
    'X-Request-Id': requestId,
  };
  return (
    `HTTP/1.1 ${err.status} ${STATUS_CODES[err.status]}\r\n` +
    Object.entries(headers)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('') +
    'Connection: close\r\n\r\n' +
    body
  );
}

/**
 * Gives the answers Node writes by itself, before any middleware runs, the problem+json body of
 * every other error: 431 for headers (or a URL) over the header size limit, 408 for a request
 * that missed the header or request timeout, 400 for a request that is not HTTP, and 417 for an
 * `Expect` other than 100-continue. Where Node has already stopped reading the socket (it
 * reports a second parse error on a socket it no longer writes to), nothing can be sent and
 * the connection is closed.
 */
export function answerNodeErrorsAsProblems(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    socket.end(rawProblem(clientErrorProblem(err, maxHeaderSize)));
  });
  server.on('checkExpectation', (_req: IncomingMessage, res: ServerResponse) => {
    const err = new AppError('expectation_failed', 'The only Expect this server supports is 100-continue.');
    const requestId = randomUUID();
    const body = JSON.stringify(problemDocument(err, requestId));
    res.shouldKeepAlive = false;
    res.writeHead(err.status, {
      ...PROBLEM_HEADERS,
      'Content-Length': Buffer.byteLength(body),
      'X-Request-Id': requestId,
    });
    res.end(body);
  });
}
