import type { EntityManager } from 'typeorm';
import { Injectable } from '@app/common/di';
import { AuditRepository } from './audit.repository';
import { AUDIT_LIST_MAX, type AuditEntry, type AuditQuery, type AuditRecord } from './audit.types';

/**
 * The audit log of admin actions. Callers that change state in a transaction pass its entity
 * manager, so that the action and its entry commit together or not at all.
 */
@Injectable()
export class AuditService {
  constructor(private readonly audit: AuditRepository) {}

  record(entry: AuditEntry, manager?: EntityManager): Promise<void> {
    return this.audit.append(entry, manager);
  }

  list(query: AuditQuery): Promise<AuditRecord[]> {
    return this.audit.list({ ...query, limit: Math.min(Math.max(1, query.limit), AUDIT_LIST_MAX) });
  }
}
