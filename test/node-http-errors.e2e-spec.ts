import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { ERROR_TITLES, ErrorCode } from '@app/common/app-error';
import { makeTenant } from './factories';
import { useTestApp, TestApp } from './support/test-app';

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: Record<string, unknown> | null;
  /** True when the server closed the connection without a word. */
  reset: boolean;
}

/** Writes `raw` to the server on a new connection and reads until the server closes it. */
function rawRequest(port: number, raw: string): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(raw));
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head, ...rest] = text.split('\r\n\r\n');
      const [statusLine, ...lines] = head.split('\r\n');
      const headers = Object.fromEntries(
        lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
      );
      const body = rest.join('\r\n\r\n');
      resolve({
        status: Number(statusLine.split(' ')[1] ?? 0),
        headers,
        body:
          body && headers['content-type']?.startsWith('application/problem+json') ? JSON.parse(body) : null,
        reset: text.length === 0,
      });
    });
  });
}

function expectRawProblem(res: RawAnswer, status: number, code: ErrorCode): void {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(res.headers['connection']).toBe('close');
  expect(res.body).toEqual(
    expect.objectContaining({
      type: `urn:tally:problem:${code}`,
      title: ERROR_TITLES[code],
      status,
      code,
      detail: expect.any(String),
      requestId: res.headers['x-request-id'],
    }),
  );
}

async function listen(t: TestApp): Promise<number> {
  if (!t.http.listening) await new Promise<void>((resolve) => t.http.listen(0, '127.0.0.1', resolve));
  return (t.http.address() as AddressInfo).port;
}

describe("Node's own 4xx answers carry problem+json", () => {
  const t = useTestApp();
  let port: number;
  beforeAll(async () => {
    port = await listen(t);
  });

  it('a 20 KB header is 431 headers_too_large', async () => {
    const res = await rawRequest(
      port,
      `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    );
    expectRawProblem(res, 431, 'headers_too_large');
  });

  it('2,000 headers (over 16 KB in all) are 431 headers_too_large', async () => {
    const many = Array.from({ length: 2000 }, (_, i) => `X-Custom-Header-${i}: value-${i}\r\n`).join('');
    const res = await rawRequest(port, `GET /healthz HTTP/1.1\r\nHost: x\r\n${many}\r\n`);
    expectRawProblem(res, 431, 'headers_too_large');
  });

  it('a 70 KB query string is 431 headers_too_large, not a reset', async () => {
    const res = await rawRequest(
      port,
      `GET /api/v1/events?q=${'q'.repeat(70_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
    );
    expect(res.reset).toBe(false);
    expectRawProblem(res, 431, 'headers_too_large');
  });

  it('Expect: bogus is 417 expectation_failed', async () => {
    const res = await rawRequest(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: bogus\r\n\r\n');
    expectRawProblem(res, 417, 'expectation_failed');
  });

  it('a request that is not HTTP is 400 malformed_request', async () => {
    const res = await rawRequest(port, 'HELLO THERE\r\n\r\n');
    expectRawProblem(res, 400, 'malformed_request');
  });

  it('Expect: 100-continue still works', async () => {
    const tenant = await makeTenant(t.app);
    const body = '{"events":[{"eventName":"x"}]}';
    const answer = await new Promise<string>((resolve) => {
      const socket = connect(port, '127.0.0.1', () =>
        socket.write(
          `POST /api/ingest HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${tenant.liveKey}\r\n` +
            `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\n` +
            'Connection: close\r\n\r\n',
        ),
      );
      let text = '';
      socket.on('data', (c: Buffer) => {
        if (!text) socket.write(body);
        text += c.toString();
      });
      socket.on('close', () => resolve(text));
    });
    expect(answer).toMatch(/^HTTP\/1\.1 100 Continue\r\n/);
    expect(answer).toContain('HTTP/1.1 200 OK');
  });
});

describe('the header timeout is enforced within a second of its value, with problem+json', () => {
  const t = useTestApp();

  it('headers that never end get 408 request_timeout', async () => {
    const checking = (t.http as typeof t.http & { connectionsCheckingInterval: number })
      .connectionsCheckingInterval;
    expect(checking).toBeLessThanOrEqual(1000);
    // A short header timeout for this server only, so the test does not wait 20 s.
    t.http.headersTimeout = 500;
    t.http.requestTimeout = 1000;
    const port = await listen(t);
    const res = await rawRequest(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n');
    expectRawProblem(res, 408, 'request_timeout');
  });
});

describe('HSTS only over HTTPS', () => {
  describe('without a trusted proxy', () => {
    const t = useTestApp();
    it('plain HTTP gets no Strict-Transport-Security, even with a forged X-Forwarded-Proto', async () => {
      expect((await request(t.http).get('/healthz')).headers['strict-transport-security']).toBeUndefined();
      const forged = await request(t.http).get('/healthz').set('X-Forwarded-Proto', 'https');
      expect(forged.headers['strict-transport-security']).toBeUndefined();
    });
  });

  describe('behind a TLS-terminating proxy (TRUST_PROXY)', () => {
    const t = useTestApp({ TRUST_PROXY: '1' });
    it('X-Forwarded-Proto: https from the proxy gets Strict-Transport-Security; http does not', async () => {
      const https = await request(t.http).get('/healthz').set('X-Forwarded-Proto', 'https');
      expect(https.headers['strict-transport-security']).toBe('max-age=31536000; includeSubDomains');
      const http = await request(t.http).get('/healthz').set('X-Forwarded-Proto', 'http');
      expect(http.headers['strict-transport-security']).toBeUndefined();
    });
  });
});
