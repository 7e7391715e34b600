import { DataSource, EntityManager } from 'typeorm';
import { Inject, Injectable } from '@app/common/di';
import type { AuditAction, AuditActor, AuditEntry, AuditQuery, AuditRecord } from './audit.types';

interface AuditRow {
  id: string;
  at: Date;
  actor_type: AuditActor['type'];
  actor_id: string;
  action: AuditAction;
  app_id: string | null;
  target_id: string | null;
  details: Record<string, unknown>;
}

function actorId(actor: AuditActor): string {
  return actor.type === 'api_key' ? actor.keyId : actor.osUser;
}

function toRecord(row: AuditRow): AuditRecord {
  const actor: AuditActor =
    row.actor_type === 'api_key'
      ? { type: 'api_key', keyId: row.actor_id }
      : { type: 'cli', osUser: row.actor_id };
  return {
    id: String(row.id),
    at: row.at.toISOString(),
    actor,
    action: row.action,
    appId: row.app_id,
    targetId: row.target_id,
    details: row.details,
  };
}

/** The append-only `audit_log`. It has no method that changes a row: the table refuses that too. */
@Injectable()
export class AuditRepository {
  // The primary DataSource (injected by its class; the admin CLI passes its own).
  constructor(@Inject(DataSource) private readonly db: DataSource) {}

  /** Appends one entry, inside the caller's transaction when `manager` is given. */
  async append(entry: AuditEntry, manager?: EntityManager): Promise<void> {
    await (manager ?? this.db).query(
      `INSERT INTO audit_log (actor_type, actor_id, action, app_id, target_id, details)
       VALUES ($1, $2, $3, $4, $5, $6::jsonb)`,
      [
        entry.actor.type,
        actorId(entry.actor),
        entry.action,
        entry.appId,
        entry.targetId ?? null,
        JSON.stringify(entry.details ?? {}),
      ],
    );
  }

  /** The newest `limit` entries that match, oldest first. */
  async list(query: AuditQuery): Promise<AuditRecord[]> {
    const rows = (await this.db.query(
      `SELECT * FROM (
         SELECT id, at, actor_type, actor_id, action, app_id, target_id, details FROM audit_log
          WHERE ($1::uuid IS NULL OR app_id = $1::uuid) AND ($2::timestamptz IS NULL OR at >= $2::timestamptz)
          ORDER BY id DESC LIMIT $3
       ) newest ORDER BY id`,
      [query.appId ?? null, query.since ?? null, query.limit],
    )) as AuditRow[];
    return rows.map(toRecord);
  }
}
