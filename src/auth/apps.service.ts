import { randomBytes, randomUUID } from 'node:crypto';
import { AppError } from '@app/common/app-error';
import { Injectable } from '@app/common/di';
import { DEFAULT_TIME_ZONE } from '@app/common/timezones';
import type { EntityManager } from 'typeorm';
import type { AppEntity } from './app.entity';
import { AuditService } from '@app/audit/audit.service';
import type { AuditActor } from '@app/audit/audit.types';
import { AppRepository, AppSummary } from './app.repository';
import { assertTimeZone } from './timezone-validation';

export interface AppView {
  id: string;
  name: string;
  /** IANA time zone of the app's rollup days. */
  timezone: string;
  /** Payload keys declared as breakdown dimensions. */
  dimensions: string[];
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
  async create(name: string, actor: AuditActor, timezone: string = DEFAULT_TIME_ZONE): Promise<AppView> {
    const trimmed = checkName(name);
    const zone = assertTimeZone(timezone);
    const app = await this.apps.transaction(async (manager) => {
      const created = await this.apps.insert(
        { id: randomUUID(), name: trimmed, piiSecret: randomBytes(32), timezone: zone },
        manager,
      );
      await this.audit.record(
        {
          action: 'app.created',
          actor,
          appId: created.id,
          targetId: created.id,
          details: { name: trimmed, timezone: zone },
        },
        manager,
      );
      return created;
    });
    return view(app);
  }

  /** Renames an app (1 to 200 characters); audited as `app.renamed`. */
  async rename(appId: string, name: string, actor: AuditActor): Promise<AppView> {
    const trimmed = checkName(name);
    await this.apps.transaction(async (manager) => {
      if (!(await this.apps.rename(appId, trimmed, manager))) {
        throw new AppError('not_found', `No such app: ${appId}`);
      }
      await this.audit.record(
        { action: 'app.renamed', actor, appId, targetId: appId, details: { name: trimmed } },
        manager,
      );
    });
    const app = (await this.apps.listAll()).find((a) => a.id === appId);
    if (!app) throw new AppError('not_found', `No such app: ${appId}`);
    return view(app);
  }

  /**
   * Marks the app as being deleted, in the caller's transaction: from its commit on, it is
   * listed nowhere and takes no new key. Returns its name; `not_found` when there is no such app.
   */
  async markDeleting(appId: string, manager: EntityManager): Promise<string> {
    const name = await this.apps.markDeleting(appId, manager);
    if (name === null) throw new AppError('not_found', `No such app: ${appId}`);
    return name;
  }

  async list(): Promise<AppView[]> {
    return (await this.apps.listAll()).map(view);
  }

  /** The app's configured time zone, or null when there is no such app. */
  timezoneOf(appId: string): Promise<string | null> {
    return this.apps.timezoneOf(appId);
  }

  /** Fails with `not_found` naming the ids that are not apps. */
  async assertExist(ids: string[]): Promise<void> {
    const found = new Set(await this.apps.existingIds(ids));
    const missing = ids.filter((id) => !found.has(id));
    if (missing.length) throw new AppError('not_found', `No such app: ${missing.join(', ')}`);
  }

  /** Id, name, time zone and dimensions of the apps among `ids` that exist, ordered by name. */
  namesOf(ids: string[]): Promise<AppSummary[]> {
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

/** An app name, trimmed: 1 to 200 characters (invalid_body otherwise). */
function checkName(name: string): string {
  const trimmed = name.trim();
  if (trimmed.length < 1 || trimmed.length > 200) {
    throw new AppError('invalid_body', 'An app name is 1 to 200 characters.');
  }
  return trimmed;
}

function view(app: AppEntity): AppView {
  return {
    id: app.id,
    name: app.name,
    timezone: app.timezone,
    dimensions: app.dimensions ?? [],
    createdAt: app.createdAt.toISOString(),
  };
}
