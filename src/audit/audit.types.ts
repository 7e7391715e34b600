/** Every kind of admin action the audit log records. A name is never changed once released. */
export const AUDIT_ACTIONS = [
  'app.created',
  'app.timezone_changed',
  'key.created',
  'key.rotated',
  'key.revoked',
  'deletion.requested',
  'deletion.finished',
  'suppression.added',
  'suppression.removed',
  'plan.updated',
  'quarantine.replayed',
  'app.renamed',
  'app.deletion_requested',
  'app.dimensions_changed',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** Who acted: an API key through the HTTP API, or a person at the admin CLI. */
export type AuditActor = { type: 'api_key'; keyId: string } | { type: 'cli'; osUser: string };

/** What a caller records. `details` holds ids and counts only: never a secret or a raw user id. */
export interface AuditEntry {
  action: AuditAction;
  actor: AuditActor;
  appId: string | null;
  targetId?: string | null;
  details?: Record<string, unknown>;
}

/** One stored entry, as `tally audit list --json` prints it. */
export interface AuditRecord {
  id: string;
  at: string;
  actor: AuditActor;
  action: AuditAction;
  appId: string | null;
  targetId: string | null;
  details: Record<string, unknown>;
}

/** The most entries one listing returns. */
export const AUDIT_LIST_MAX = 10_000;

export interface AuditQuery {
  appId?: string;
  since?: Date;
  limit: number;
}
