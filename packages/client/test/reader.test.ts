import { TallyError, TallyReader } from '../src/index.js';

function replying(
  pages: Record<string, { status?: number; body: unknown; headers?: Record<string, string> }>,
) {
  const urls: string[] = [];
  const fetchImpl = (async (input: string | URL | Request) => {
    const url = String(input);
    urls.push(url);
    const u = new URL(url);
    const page = pages[u.pathname + u.search] ?? pages[u.pathname];
    return new Response(JSON.stringify(page.body), { status: page.status ?? 200, headers: page.headers });
  }) as typeof fetch;
  return { urls, fetchImpl };
}

describe('TallyReader', () => {
  it('follows Link, then X-Next-Cursor, until a page has neither', async () => {
    const first = '/api/v1/events?appId=a&limit=2&testMode=all';
    const { urls, fetchImpl } = replying({
      [first]: {
        body: [{ eventId: '1' }, { eventId: '2' }],
        headers: { link: '</api/v1/events?appId=a&cursor=c1>; rel="next"' },
      },
      '/api/v1/events?appId=a&cursor=c1': { body: [{ eventId: '3' }], headers: { 'x-next-cursor': 'c2' } },
      '/api/v1/events?appId=a&cursor=c2': { body: [{ eventId: '4' }] },
    });
    const reader = new TallyReader({
      endpoint: 'http://tally.test/',
      apiKey: 'k',
      pageSize: 2,
      fetch: fetchImpl,
    });
    const ids: string[] = [];
    for await (const e of reader.events({ appId: 'a', testMode: 'all' })) ids.push(String(e.eventId));
    expect(ids).toEqual(['1', '2', '3', '4']);
    expect(urls).toEqual([
      'http://tally.test' + first,
      'http://tally.test/api/v1/events?appId=a&cursor=c1',
      'http://tally.test/api/v1/events?appId=a&cursor=c2',
    ]);
  });

  it('rollups follows the cursor and returns every page', async () => {
    const first = '/api/v1/rollups?appId=a&range=30d';
    const { urls, fetchImpl } = replying({
      [first]: {
        body: [{ date: '2026-11-01' }, { date: '2026-11-02' }],
        headers: { link: '</api/v1/rollups?appId=a&range=30d&cursor=r1>; rel="next"', 'x-next-cursor': 'r1' },
      },
      '/api/v1/rollups?appId=a&range=30d&cursor=r1': { body: [{ date: '2026-11-03' }] },
    });
    const reader = new TallyReader({ endpoint: 'http://tally.test', apiKey: 'k', fetch: fetchImpl });
    const rows = await reader.rollups({ appId: 'a', range: '30d' });
    expect(rows.map((r) => r.date)).toEqual(['2026-11-01', '2026-11-02', '2026-11-03']);
    expect(urls).toEqual([
      'http://tally.test' + first,
      'http://tally.test/api/v1/rollups?appId=a&range=30d&cursor=r1',
    ]);
  });
});

describe('TallyReader errors', () => {
  it('turns an error answer into a TallyError, and retries a 429 after Retry-After', async () => {
    let calls = 0;
    const sleeps: number[] = [];
    const reader = new TallyReader({
      endpoint: 'http://tally.test',
      apiKey: 'k',
      sleep: async (ms) => void sleeps.push(ms),
      fetch: (async () => {
        calls++;
        if (calls === 1) {
          return new Response(
            JSON.stringify({ code: 'rate_limited', detail: 'slow down', requestId: 'r1' }),
            {
              status: 429,
              headers: { 'retry-after': '2' },
            },
          );
        }
        return new Response(
          JSON.stringify({
            code: 'app_forbidden',
            detail: 'no access',
            requestId: 'r2',
            errors: [{ field: 'appId', code: 'x', message: 'm' }],
          }),
          { status: 403 },
        );
      }) as typeof fetch,
    });
    const err = await reader.rollups({ appId: 'a', range: '7d' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TallyError);
    expect(err).toMatchObject({
      status: 403,
      code: 'app_forbidden',
      detail: 'no access',
      requestId: 'r2',
      retryAfterMs: null,
      errors: [{ field: 'appId', code: 'x', message: 'm' }],
    });
    expect(sleeps).toEqual([2000]);
  });
});

describe('TallyReader erasure', () => {
  it('deleteUsers posts the request as JSON, deletion() reads one back', async () => {
    const calls: { url: string; init?: RequestInit }[] = [];
    const deletion = {
      id: 'd1',
      appId: 'a',
      status: 'pending',
      users: 2,
      suppress: false,
      eventsDeleted: 0,
      daysRecomputed: 0,
      createdAt: 1,
      startedAt: null,
      finishedAt: null,
    };
    const reader = new TallyReader({
      endpoint: 'http://tally.test/',
      apiKey: 'k',
      fetch: (async (input: string | URL | Request, init?: RequestInit) => {
        calls.push({ url: String(input), init });
        const body = String(input).endsWith('/d1') ? { ...deletion, status: 'done' } : deletion;
        return new Response(JSON.stringify(body), { status: String(input).endsWith('/d1') ? 200 : 202 });
      }) as typeof fetch,
    });
    expect(await reader.deleteUsers('a', ['u1', 'u2'], { suppress: false })).toEqual(deletion);
    expect(calls[0].url).toBe('http://tally.test/api/v1/deletions');
    expect(calls[0].init?.method).toBe('POST');
    expect(JSON.parse(String(calls[0].init?.body))).toEqual({
      appId: 'a',
      anonymousUserIds: ['u1', 'u2'],
      suppress: false,
    });
    expect((calls[0].init?.headers as Record<string, string>)['content-type']).toBe('application/json');
    expect((await reader.deletion('d1')).status).toBe('done');
    expect(calls[1].url).toBe('http://tally.test/api/v1/deletions/d1');
    expect(calls[1].init?.method).toBeUndefined();
  });

  it('a refused deletion becomes a TallyError with the code', async () => {
    const reader = new TallyReader({
      endpoint: 'http://tally.test',
      apiKey: 'k',
      fetch: (async () =>
        new Response(JSON.stringify({ code: 'app_forbidden', detail: 'no', requestId: 'r' }), {
          status: 403,
        })) as typeof fetch,
    });
    await expect(reader.deleteUsers('a', ['u'])).rejects.toMatchObject({
      status: 403,
      code: 'app_forbidden',
    });
  });

  it('activeUsers and breakdown send the documented parameters and return the rows', async () => {
    const { urls, fetchImpl } = replying({
      '/api/v1/active-users': { body: [{ start: '2026-11-01', end: '2026-11-07', users: 3, final: true }] },
      '/api/v1/breakdown': {
        body: [{ value: 'iOS', events: 2, users: 1, sessions: 1, floatValue: null, other: false }],
      },
    });
    const reader = new TallyReader({ endpoint: 'http://tally.test', apiKey: 'k', fetch: fetchImpl });
    const buckets = await reader.activeUsers({ appId: 'a', range: '30d', interval: 'day', window: 7 });
    expect(buckets).toEqual([{ start: '2026-11-01', end: '2026-11-07', users: 3, final: true }]);
    const rows = await reader.breakdown({
      appId: 'a',
      by: 'platform',
      limit: 5,
      appVersion: '2.4.1',
      testMode: 'all',
    });
    expect(rows[0].value).toBe('iOS');
    expect(urls).toEqual([
      'http://tally.test/api/v1/active-users?appId=a&range=30d&interval=day&window=7',
      'http://tally.test/api/v1/breakdown?appId=a&by=platform&limit=5&testMode=all&appVersion=2.4.1',
    ]);
  });
});
