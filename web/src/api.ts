/** Calls Tally's read API on this origin with the signed-in key, and turns errors into messages. */
// Type-only: the bundle does not change. Relative, as jest's tests of these modules resolve it too.
// eslint-disable-next-line no-restricted-imports
import type { components } from '../../packages/client/src/generated/openapi';

const STORAGE_KEY = 'tally.dashboard.apiKey';

export function storedKey(): string | null {
  return sessionStorage.getItem(STORAGE_KEY);
}

export function storeKey(key: string): void {
  sessionStorage.setItem(STORAGE_KEY, key);
}

export function forgetKey(): void {
  sessionStorage.removeItem(STORAGE_KEY);
}

export interface Problem {
  status: number;
  code: string;
  detail: string;
  requiredScope?: string;
  retryAfterSeconds?: number;
}

export class ApiError extends Error {
  constructor(readonly problem: Problem) {
    super(problem.detail);
  }
}

// The shapes of the API's answers, generated from docs/openapi.json with the client package.
type Schemas = components['schemas'];
/** GET /api/v1/key: the key's prefix, scopes and the apps it reads, each with its time zone. */
export type KeyInfo = Schemas['KeyInfoDto'];
/** One row of GET /api/v1/rollups. */
export type Rollup = Schemas['RollupRecordDto'];
/** One stored event as GET /api/v1/events returns it. */
export type EventRecord = Schemas['EventRecordDto'];
/** An app of GET /api/v1/key, with the payload keys it declared as breakdown dimensions. */
export type KeyApp = Schemas['KeyAppDto'];
/** One bucket of GET /api/v1/active-users: the distinct users of the local days [start, end]. */
export type ActiveUsersRow = Schemas['ActiveUsersRowDto'];
/** One row of GET /api/v1/breakdown; `value: null` is the events that lack the field. */
export type BreakdownRow = Schemas['BreakdownRowDto'];

function scopeFromChallenge(header: string | null): string | undefined {
  const match = header ? /scope="([^"]+)"/.exec(header) : null;
  return match ? match[1] : undefined;
}

async function problemOf(res: Response): Promise<Problem> {
  let body: Record<string, unknown> = {};
  try {
    body = (await res.json()) as Record<string, unknown>;
  } catch {
    // A proxy's HTML error page: the status alone has to do.
  }
  const retryAfter = Number(res.headers.get('Retry-After'));
  return {
    status: res.status,
    code: typeof body.code === 'string' ? body.code : `http_${res.status}`,
    detail: typeof body.detail === 'string' ? body.detail : res.statusText,
    requiredScope:
      typeof body.requiredScope === 'string'
        ? body.requiredScope
        : scopeFromChallenge(res.headers.get('WWW-Authenticate')),
    retryAfterSeconds: Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : undefined,
  };
}

/** GET a same-origin API path with the key. Relative paths only: the key never leaves this origin. */
export async function get<T>(path: string, params: Record<string, string> = {}): Promise<T> {
  return (await getPage<T>(path, params)).body;
}

/** GET one page of a paged read: its body and the `X-Next-Cursor` of the next page, if any. */
export async function getPage<T>(
  path: string,
  params: Record<string, string> = {},
): Promise<{ body: T; nextCursor: string | null }> {
  const key = storedKey();
  if (!key) throw new ApiError({ status: 401, code: 'invalid_key', detail: 'Not signed in.' });
  const query = new URLSearchParams(params).toString();
  let res: Response;
  try {
    res = await fetch(`${path}${query ? `?${query}` : ''}`, {
      headers: { Authorization: `Bearer ${key}`, Accept: 'application/json' },
      credentials: 'omit',
      cache: 'no-store',
      referrerPolicy: 'no-referrer',
    });
  } catch {
    throw new ApiError({ status: 0, code: 'network', detail: 'Tally cannot be reached.' });
  }
  if (!res.ok) throw new ApiError(await problemOf(res));
  return { body: (await res.json()) as T, nextCursor: res.headers.get('X-Next-Cursor') };
}

/**
 * A sentence a person can act on, for any failed call. `signedIn` is false while the key is being
 * tried at sign-in: the form is on screen, so the user pastes another key rather than signs out.
 */
export function describeProblem(p: Problem, signedIn = true): string {
  const paste = signedIn ? 'Sign out and paste' : 'Paste';
  switch (p.status) {
    case 0:
      return 'Tally cannot be reached. Check the connection; the page retries on the next refresh.';
    case 401:
      return p.code === 'wrong_key_type'
        ? `This is an ingest key. The dashboard needs an API key (tly_api_…). ${paste} one.`
        : `The key was refused (401): it is mistyped, revoked or expired. ${paste} a valid API key.`;
    case 403:
      if (p.code === 'insufficient_scope') {
        return `The key lacks the scope ${p.requiredScope ?? 'this view needs'} (403). Issue a key with it, e.g. node_modules/.bin/tally keys create-api --app <appId> --scope ${p.requiredScope ?? 'rollups:read'}.`;
      }
      return 'The key has no access to this app (403).';
    case 429:
      return `Too many requests (429). Waiting ${p.retryAfterSeconds ?? 1} s before trying again.`;
    case 503:
      return `Tally is temporarily unavailable (503). Trying again in ${p.retryAfterSeconds ?? 5} s.`;
    default:
      return `The request failed (${p.status} ${p.code}): ${p.detail}`;
  }
}

/**
 * A lane that runs the tasks given to it one after another, in the order given. The board's reads
 * (rollups, active users, breakdown) share one lane, so that together they hold one read at most.
 */
export function serialLane(): <T>(task: () => Promise<T>) => Promise<T> {
  let tail: Promise<unknown> = Promise.resolve();
  return <T>(task: () => Promise<T>) => {
    const run = tail.then(task, task);
    tail = run.catch(() => undefined);
    return run;
  };
}

/**
 * Wraps `task` so that at most one call runs at a time. A call made while one runs waits for it,
 * and all such calls together cause one more run afterwards, so the last request always wins.
 * The dashboard keeps one rollups read and one live read in flight at most: within the server's
 * default of two reads at once per key (READ_MAX_CONCURRENT_PER_KEY), however slow it answers.
 */
export function singleFlight(task: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | null = null;
  let again = false;
  return () => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      try {
        do {
          again = false;
          await task();
        } while (again);
      } finally {
        running = null;
      }
    })();
    return running;
  };
}
