// SQLSTATE classes and codes that mean "the database cannot serve right now", not "your
// request is wrong": the client should retry later.
const TRANSIENT_SQLSTATE_PREFIXES = ['08', '53', '57P', '58'];
const TRANSIENT_SQLSTATES = new Set(['40001', '40P01', '55P03', '57014']);
const TRANSIENT_NODE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
]);
const TRANSIENT_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error',
  'Connection is not established',
  'Cannot use a pool after calling end',
  'terminating connection',
  // A missing daily partition is a server-side state that maintenance repairs; retrying helps.
  'no partition of relation',
];

/** The SQLSTATE (or Node error code) of a database error, if it has one. */
export function sqlState(err: unknown): string | undefined {
  const e = err as { code?: unknown; driverError?: { code?: unknown } };
  const code = e?.driverError?.code ?? e?.code;
  return typeof code === 'string' ? code : undefined;
}

/** True when a database error is a passing fault (outage, overload, timeout, failover). */
export function isTransientDatabaseError(err: unknown): boolean {
  if (!err || typeof err !== 'object') return false;
  const code = sqlState(err);
  if (code) {
    if (TRANSIENT_NODE_CODES.has(code) || TRANSIENT_SQLSTATES.has(code)) return true;
    if (/^[0-9A-Z]{5}$/.test(code) && TRANSIENT_SQLSTATE_PREFIXES.some((p) => code.startsWith(p)))
      return true;
  }
  const message = (err as Error).message ?? '';
  return TRANSIENT_MESSAGES.some((m) => message.includes(m));
}

/** True when PostgreSQL cancelled a statement, as `statement_timeout` does (SQLSTATE 57014). */
export function isStatementTimeout(err: unknown): boolean {
  return !!err && typeof err === 'object' && sqlState(err) === '57014';
}
