import { randomBytes, randomUUID } from 'node:crypto';
import { AppError } from '@app/common/app-error';
import { Injectable } from '@app/common/di';
import { AuditService } from '@app/audit/audit.service';
import type { AuditActor } from '@app/audit/audit.types';
import { AppRepository } from './app.repository';

export interface AppView {
  id: string;
  name: string;
  createdAt: string;
}

@Injectable()
export class AppsService {
  private readonly piiSecrets = new Map<string, Buffer>();

  constructor(
    private readonly apps: AppRepository,
    private readonly audit: AuditService,
  ) {}

  /** Creates an app; the audit entry commits with it. */
  async create(name: string, actor: AuditActor): Promise<AppView> {
    const trimmed = name.trim();
    if (trimmed.length < 1 || trimmed.length > 200) {
      throw new AppError('invalid_body', 'An app name is 1 to 200 characters.');
    }
    const app = await this.apps.transaction(async (manager) => {
      const created = await this.apps.insert(
        { id: randomUUID(), name: trimmed, piiSecret: randomBytes(32) },
        manager,
      );
      await this.audit.record(
        { action: 'app.created', actor, appId: created.id, targetId: created.id, details: { name: trimmed } },
        manager,
      );
      return created;
    });
    return { id: app.id, name: app.name, createdAt: app.createdAt.toISOString() };
  }

  async list(): Promise<AppView[]> {
    const apps = await this.apps.listAll();
    return apps.map((a) => ({ id: a.id, name: a.name, createdAt: a.createdAt.toISOString() }));
  }

  /** Fails with `not_found` naming the ids that are not apps. */
  async assertExist(ids: string[]): Promise<void> {
    const found = new Set(await this.apps.existingIds(ids));
    const missing = ids.filter((id) => !found.has(id));
    if (missing.length) throw new AppError('not_found', `No such app: ${missing.join(', ')}`);
  }

  /** Id and name of the apps among `ids` that exist, ordered by name. */
  namesOf(ids: string[]): Promise<{ id: string; name: string }[]> {
    return ids.length ? this.apps.namesOf(ids) : Promise.resolve([]);
  }

  /** The app's pseudonymisation key. Immutable, so it is cached for the process lifetime. */
  async piiSecret(appId: string): Promise<Buffer> {
    const cached = this.piiSecrets.get(appId);
    if (cached) return cached;
    const secret = await this.apps.piiSecret(appId);
    if (!secret) throw new AppError('internal_error', 'App has no secret.');
    this.piiSecrets.set(appId, secret);
    return secret;
  }
}
