import type { Response } from 'supertest';

/** An event that an ingest answer lists under `errors` (its message is free text). */
export interface EventError {
  index: number;
  eventId?: string | null;
  field: string;
  code: string;
}

/**
 * A 200 answer to POST /api/ingest whose counts are `counts` (each one exactly, `errorCounts`
 * included) and whose `errors` are exactly `errors`, in order, each with a message.
 */
export function expectIngestAnswer(
  res: Response,
  counts: Record<string, unknown>,
  errors: EventError[],
): void {
  expect(res.status).toBe(200);
  expect(res.body).toEqual(expect.objectContaining(counts));
  expect(res.body.errors).toEqual(errors.map((error) => ({ ...error, message: expect.any(String) })));
}
