import { ClientRequest, IncomingMessage, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { bearer } from '../factories';

/** Makes the test app's server listen on a free port of 127.0.0.1; resolves with the port. */
export async function listen(http: Server): Promise<number> {
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  return (http.address() as AddressInfo).port;
}

export interface Upload {
  req: ClientRequest;
  /** The server's answer, whenever it comes (possibly before the body is complete). */
  answer: Promise<{ status: number; headers: IncomingMessage['headers']; body: Record<string, unknown> }>;
}

/**
 * An ingest request that declares `declared` bytes and sends only the first `sent` of them (a
 * batch of one event whose name fills them); the rest is the caller's to send, or never comes.
 */
export function startUpload(port: number, key: string, declared: number, sent: number): Upload {
  const req = httpRequest({
    host: '127.0.0.1',
    port,
    method: 'POST',
    path: '/api/ingest',
    headers: { ...bearer(key), 'Content-Type': 'application/json', 'Content-Length': declared },
  });
  req.on('error', () => undefined);
  const answer = new Promise<Awaited<Upload['answer']>>((resolve) => {
    req.on('response', (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(text) }),
      );
      res.on('error', () => undefined);
    });
  });
  req.write(`{"events":[{"eventName":"${'x'.repeat(sent - 27)}"}]`);
  return { req, answer };
}
