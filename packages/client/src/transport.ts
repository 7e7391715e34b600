// One POST of a batch body: gzip above a size, a timeout covering the answer, and the answer read.
import { gzip, utf8Length } from './encoding.js';
import { TallyError } from './errors.js';
import type { IngestResult } from './types.js';

export interface TransportOptions {
  url: string;
  authorization: string;
  fetch: typeof fetch;
  gzipAboveBytes: number;
  requestTimeoutMs: number;
  now: () => number;
}

/** A 200 with its result, or the error that ended the attempt (`status` 0 when no answer came). */
export type AttemptOutcome = { result: IngestResult } | { error: TallyError };

export async function postBatch(body: string, o: TransportOptions): Promise<AttemptOutcome> {
  let res: Response;
  try {
    res = await post(body, o);
  } catch (err) {
    return { error: toTallyError(err) };
  }
  if (res.status !== 200) return { error: await TallyError.fromResponse(res, o.now()) };
  try {
    return { result: (await res.json()) as IngestResult };
  } catch (err) {
    // The answer was lost on the way: a retry of a stored batch comes back as duplicates.
    return { error: new TallyError({ status: 0, code: 'network_error', detail: String(err), cause: err }) };
  }
}

async function post(body: string, o: TransportOptions): Promise<Response> {
  const headers: Record<string, string> = {
    authorization: o.authorization,
    'content-type': 'application/json',
  };
  let payload: string | Uint8Array = body;
  // UTF-8 takes at most 3 bytes per UTF-16 unit: most bodies are sized without a scan.
  const over =
    body.length > o.gzipAboveBytes ||
    (body.length * 3 > o.gzipAboveBytes && utf8Length(body) > o.gzipAboveBytes);
  if (over) {
    payload = await gzip(body);
    headers['content-encoding'] = 'gzip';
  }
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), o.requestTimeoutMs);
  unref(timer);
  try {
    const res = await o.fetch(o.url, {
      method: 'POST',
      headers,
      body: payload as BodyInit,
      signal: controller.signal,
    });
    if (res.status !== 200) return res;
    // Read the body within the timeout too.
    const text = await res.text();
    return new Response(text, { status: 200, headers: res.headers });
  } catch (err) {
    if (controller.signal.aborted) {
      throw new TallyError({
        status: 0,
        code: 'timeout',
        detail: `No answer within ${o.requestTimeoutMs} ms`,
        cause: err,
      });
    }
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

export function toTallyError(err: unknown): TallyError {
  if (err instanceof TallyError) return err;
  return new TallyError({
    status: 0,
    code: 'network_error',
    detail:
      err instanceof Error
        ? `${err.message}${err.cause ? ` (${String((err.cause as Error).message ?? err.cause)})` : ''}`
        : String(err),
    cause: err,
  });
}

export function unref(t: unknown): void {
  (t as { unref?: () => void }).unref?.();
}
