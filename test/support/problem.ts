import type request from 'supertest';
import { ERROR_TITLES, ErrorCode } from '@app/common/app-error';

/** Asserts an RFC 9457 problem response: status, stable code, the document members and the request id. */
export function expectProblem(res: request.Response, status: number, code: ErrorCode): void {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(res.body).toEqual(
    expect.objectContaining({
      type: `urn:tally:problem:${code}`,
      status,
      code,
      title: ERROR_TITLES[code],
      detail: expect.any(String),
      requestId: res.headers['x-request-id'],
    }),
  );
}
