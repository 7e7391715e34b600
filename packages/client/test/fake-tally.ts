import { gunzipSync } from 'node:zlib';

export type Reply = 'ok' | '400' | '429' | '429-date' | '503' | '500' | '413' | 'reset' | 'lost';

interface SentEvent {
  eventId: string;
  eventName: string;
  payload?: { step?: unknown };
}

/**
 * An injected fetch that answers POST /api/ingest from a script of replies (then `ok`), and
 * keeps what a server with eventId dedup would have stored.
 */
export class FakeTally {
  readonly stored = new Map<string, number>();
  /** How many requests carried each eventId. */
  readonly sends = new Map<string, number>();
  readonly sentAts: number[] = [];
  /** The name and `payload.step` of each eventId as last sent. */
  readonly received = new Map<string, { eventName: string; step: unknown }>();
  requests = 0;
  private at = 0;

  constructor(
    private readonly script: Reply[],
    private readonly now: () => number,
  ) {}

  readonly fetch = async (_url: string | URL | Request, init?: RequestInit): Promise<Response> => {
    this.requests++;
    const raw = init?.body;
    const text = typeof raw === 'string' ? raw : gunzipSync(Buffer.from(raw as Uint8Array)).toString('utf8');
    const body = JSON.parse(text) as { sentAt: number; events: SentEvent[] };
    this.sentAts.push(body.sentAt);
    for (const e of body.events) {
      this.sends.set(e.eventId, (this.sends.get(e.eventId) ?? 0) + 1);
      this.received.set(e.eventId, { eventName: e.eventName, step: e.payload?.step });
    }
    const reply = this.script[this.at++] ?? 'ok';
    const problem = (status: number, code: string, headers: Record<string, string> = {}, extra = {}) =>
      new Response(JSON.stringify({ status, code, detail: code, requestId: 'r', ...extra }), {
        status,
        headers: { 'content-type': 'application/problem+json', ...headers },
      });
    switch (reply) {
      case '429':
        return problem(429, 'rate_limited', { 'retry-after': '2' });
      case '429-date':
        return problem(429, 'rate_limited', { 'retry-after': new Date(this.now() + 3000).toUTCString() });
      case '503':
        return problem(503, 'service_unavailable', { 'retry-after': '1' });
      case '400':
        return problem(400, 'invalid_body');
      case '500':
        return problem(500, 'internal_error');
      case '413': {
        const limitEvents = Math.max(1, Math.floor(body.events.length / 2));
        return problem(413, 'payload_too_large', {}, { limitEvents, limitBytes: 1_048_576 });
      }
      case 'reset':
        throw new TypeError('fetch failed', {
          cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }),
        });
      case 'lost':
        this.store(body.events);
        throw new TypeError('fetch failed', { cause: new Error('other side closed') });
      case 'ok':
        return new Response(JSON.stringify(this.store(body.events)), {
          status: 200,
          headers: { 'content-type': 'application/json' },
        });
    }
  };

  private store(events: SentEvent[]) {
    let accepted = 0;
    let duplicates = 0;
    let rejected = 0;
    const errors: object[] = [];
    events.forEach((e, index) => {
      if (e.eventName === 'bad') {
        rejected++;
        errors.push({ index, eventId: e.eventId, field: 'eventName', code: 'invalid_value', message: 'bad' });
      } else if (this.stored.has(e.eventId)) {
        duplicates++;
      } else {
        this.stored.set(e.eventId, 1);
        accepted++;
      }
    });
    return {
      received: events.length,
      accepted,
      duplicates,
      rejected,
      metered: accepted,
      testMode: false,
      payloadBytes: 0,
      serverTime: this.now(),
      errors,
      warnings: [],
    };
  }
}
