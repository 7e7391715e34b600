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

// What a read that lost its server looks like: the connection was refused, reset or closed
// (SQLSTATE class 08, a server shutting down or starting, 57P01–57P03).
const CONNECTION_SQLSTATES = new Set(['57P01', '57P02', '57P03']);
const CONNECTION_MESSAGES = TRANSIENT_MESSAGES.filter((m) => m !== 'no partition of relation');

/** True when a database error means the server (not the statement) failed: another server may answer. */
export function isConnectionError(err: unknown): boolean {
  if (!err || typeof err !== 'object') return false;
  const code = sqlState(err);
  if (code && (TRANSIENT_NODE_CODES.has(code) || CONNECTION_SQLSTATES.has(code) || code.startsWith('08'))) {
    return true;
  }
  const message = (err as Error).message ?? '';
  return CONNECTION_MESSAGES.some((m) => message.includes(m));
}

/**
 * True when a standby cancelled a statement because replay had to remove rows it still needed
 * (SQLSTATE 40001 or 40P01 "conflict with recovery"): the statement can run elsewhere, the
 * standby itself is fine.
 */
export function isRecoveryConflict(err: unknown): boolean {
  const code = sqlState(err);
  return (
    (code === '40001' || code === '40P01') &&
    ((err as Error).message ?? '').includes('conflict with recovery')
  );
}
