/* global fetch */
// The hostile tenants of the isolation benchmark (bench/scenarios/isolation.mjs). Each one holds
// its own app's keys, stays within what the product lets one tenant do, and sends back to back on
// its connections; the victim's latency under each one is compared with the victim alone.
//
// An attacker is { connections, prepare(context) → state, request(state) → { path, method,
// headers, body } }. `prepare` runs once per server, before the phases.

/** A tenant's app with a live ingest key and an API key of `scopes`, made with the admin CLI. */
async function tenant({ cli, dist, url }, name, scopes) {
  const app = await cli(dist, url, ['apps', 'create', '--name', `${name}-${Date.now().toString(36)}`]);
  const ingest = await cli(dist, url, ['keys', 'create-ingest', '--app', app.id]);
  const api = await cli(dist, url, [
    'keys',
    'create-api',
    '--app',
    app.id,
    ...scopes.flatMap((s) => ['--scope', s]),
  ]);
  return { appId: app.id, ingestKey: ingest.key, apiKey: api.key };
}

const json = (key) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' });

async function putPlan(baseUrl, t, plan) {
  const res = await fetch(`${baseUrl}/api/v1/plan?appId=${t.appId}`, {
    method: 'PUT',
    headers: { ...json(t.apiKey), 'if-match': '*' },
    body: JSON.stringify(plan),
  });
  await res.arrayBuffer();
  return res.status;
}

/** All-rejected 1,000-event batches of about 946 KB: the field rules reject every event. */
export const rejectedBatches = {
  connections: 4,
  async prepare(context) {
    const t = await tenant(context, 'attacker', ['events:read']);
    const event = { eventName: 'Attack', payload: { nested: { text: 'y'.repeat(900) } } };
    const body = Buffer.from(JSON.stringify({ events: Array.from({ length: 1000 }, () => event) }));
    return { body, headers: json(t.ingestKey) };
  },
  request: ({ body, headers }) => ({ path: '/api/ingest', method: 'POST', headers, body }),
};

/**
 * The plan a black-box probe crashed the server with: 1,000 events × 11 properties, each with a
 * pattern that backtracking engines take exponential time on (625 KB). Uploaded again and again.
 */
export function patternPlan(events = 1000) {
  const properties = Object.fromEntries(
    Array.from({ length: 11 }, (_, i) => [`p${i}`, { type: 'string', pattern: '^(a|b|c){1,25}x$' }]),
  );
  const definitions = Array.from({ length: events }, (_, i) => [
    `Event.${i}`,
    { payload: { type: 'object', properties } },
  ]);
  return { mode: 'enforce', events: Object.fromEntries(definitions) };
}

export const planUploads = {
  connections: 2,
  async prepare(context) {
    const t = await tenant(context, 'plan-attacker', ['plans:read', 'plans:write']);
    return {
      body: Buffer.from(JSON.stringify(patternPlan())),
      headers: { ...json(t.apiKey), 'if-match': '*' },
      path: `/api/v1/plan?appId=${t.appId}`,
    };
  },
  request: ({ body, headers, path }) => ({ path, method: 'PUT', headers, body }),
};

/** About 28 KB of flat payload: 28 keys of 1,000 characters. */
function largeEvent(i) {
  const payload = {};
  for (let k = 0; k < 28; k++) payload[`k${k}`] = String.fromCharCode(97 + ((i + k) % 26)).repeat(1000);
  return { eventName: `Large.${i % 7}`, eventId: `large-${i}`, anonymousUserId: `u-${i % 500}`, payload };
}

/** Large events (about 28 KB each) exported as Parquet over their whole window, again and again. */
export function largeExports(events) {
  return {
    connections: 2,
    async prepare(context) {
      const t = await tenant(context, 'export-attacker', ['events:export']);
      const headers = json(t.ingestKey);
      for (let i = 0; i < events; i += 30) {
        const batch = Array.from({ length: Math.min(30, events - i) }, (_, j) => largeEvent(i + j));
        let res;
        let body;
        // Within the key's limits, as an SDK sends: a 429 waits its Retry-After.
        for (;;) {
          res = await fetch(`${context.baseUrl}/api/ingest`, {
            method: 'POST',
            headers,
            body: JSON.stringify({ events: batch }),
          });
          body = await res.json();
          if (res.status !== 429) break;
          await new Promise((resolve) =>
            setTimeout(resolve, Number(res.headers.get('retry-after') ?? 1) * 1000),
          );
        }
        if (res.status !== 200 || body.accepted !== batch.length) {
          throw new Error(`preparing the large events: ${res.status} ${JSON.stringify(body).slice(0, 200)}`);
        }
      }
      // The export's horizon (EXPORT_SETTLE_MS) must pass the last event before it is exported.
      await new Promise((resolve) => setTimeout(resolve, context.exportSettleMs + 500));
      return {
        headers: { authorization: `Bearer ${t.apiKey}` },
        path: `/api/v1/export?appId=${t.appId}&from=0&format=parquet`,
      };
    },
    request: ({ headers, path }) => ({ path, method: 'GET', headers }),
  };
}

/**
 * A flood of new event names under a plan that rejects unplanned events: each batch holds 1,000
 * names of 150 characters never sent before, so every event would go to the quarantine.
 */
export const quarantineFlood = {
  connections: 4,
  async prepare(context) {
    const t = await tenant(context, 'quarantine-attacker', ['plans:read', 'plans:write']);
    const status = await putPlan(context.baseUrl, t, { mode: 'enforce', unplanned: 'reject', events: {} });
    if (status !== 200) throw new Error(`the flood's plan was refused: ${status}`);
    return { headers: json(t.ingestKey), sent: 0 };
  },
  request(state) {
    const base = 'n'.repeat(140);
    const events = Array.from({ length: 1000 }, () => ({
      eventName: `${base}${(state.sent++).toString(36)}`,
    }));
    return { path: '/api/ingest', method: 'POST', headers: state.headers, body: JSON.stringify({ events }) };
  },
};

/**
 * The SDK formats' paths: PostHog batches with the key in the body (read before the key is known)
 * of 1,000 events that are all too old, so that every event is rejected and kept in the
 * quarantine, as the SDK formats keep every rejection, until the app's daily bound.
 */
export const sdkFormatFlood = {
  connections: 4,
  async prepare(context) {
    const t = await tenant(context, 'sdk-attacker', ['events:read']);
    const old = new Date(Date.now() - 400 * 86_400_000).toISOString();
    const batch = Array.from({ length: 1000 }, (_, i) => ({
      event: 'Attack',
      distinct_id: `user-${i}`,
      timestamp: old,
      properties: { text: 'y'.repeat(700), cart: { total: i } },
    }));
    const body = Buffer.from(JSON.stringify({ api_key: t.ingestKey, batch }));
    return { body, headers: { 'content-type': 'application/json' } };
  },
  request: ({ body, headers }) => ({ path: '/api/posthog/batch/', method: 'POST', headers, body }),
};
