import type { Request } from 'express';
import { AppError } from '@app/common/app-error';

/** 1,000 ids of up to 200 characters, escaped, with room to spare. */
export const MAX_DELETION_BODY_BYTES = 1_500_000;

/** Reads a small JSON body (the server has no global body parser): 415, 413 or 400 `invalid_json`. */
export async function readJsonBody(req: Request, maxBytes = MAX_DELETION_BODY_BYTES): Promise<unknown> {
  const type = req.headers['content-type'];
  if (typeof type !== 'string' || !/^application\/json\s*(;|$)/i.test(type)) {
    throw new AppError('unsupported_media_type', 'Send the body as Content-Type: application/json.');
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) {
      throw new AppError('payload_too_large', `The body is over ${maxBytes} bytes.`);
    }
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    throw new AppError('invalid_json', 'The body is not valid JSON.');
  }
}
