import { DataSource, EntityManager, Repository } from 'typeorm';
import { Injectable } from '@app/common/di';
import { AppEntity } from './app.entity';

/** What a key's description says of each of its apps. */
export interface AppSummary {
  id: string;
  name: string;
  timezone: string;
  /** Payload keys declared as breakdown dimensions. */
  dimensions: string[];
}

@Injectable()
export class AppRepository {
  private readonly repo: Repository<AppEntity>;

  // The primary DataSource, injected by its class; the admin CLI passes its own.
  constructor(private readonly db: DataSource) {
    this.repo = db.getRepository(AppEntity);
  }

  /** Runs `work` in one transaction; statements given its manager belong to it. */
  transaction<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }

  async insert(
    app: { id: string; name: string; piiSecret: Buffer; timezone: string },
    manager?: EntityManager,
  ): Promise<AppEntity> {
    // A new app has no rollups yet: they are computed in its zone from the start.
    const rows = (await (manager ?? this.db).query(
      `INSERT INTO apps (id, name, pii_secret, timezone, rollup_timezone) VALUES ($1, $2, $3, $4, $4)
       RETURNING id, name, timezone, created_at`,
      [app.id, app.name, app.piiSecret, app.timezone],
    )) as { id: string; name: string; timezone: string; created_at: Date }[];
    return Object.assign(new AppEntity(), {
      id: rows[0].id,
      name: rows[0].name,
      timezone: rows[0].timezone,
      dimensions: [],
      createdAt: rows[0].created_at,
    });
  }

  /** The app's configured time zone, or null when there is no such app. */
  async timezoneOf(appId: string): Promise<string | null> {
    const rows = (await this.repo.query(`SELECT timezone FROM apps WHERE id = $1`, [appId])) as {
      timezone: string;
    }[];
    return rows[0]?.timezone ?? null;
  }

  /** Every app not being deleted, oldest first. */
  async listAll(): Promise<AppEntity[]> {
    const rows = (await this.repo.query(
      `SELECT id, name, timezone, dimensions, created_at FROM apps WHERE deleting_since IS NULL
        ORDER BY created_at, id`,
    )) as { id: string; name: string; timezone: string; dimensions: string[]; created_at: Date }[];
    return rows.map((r) =>
      Object.assign(new AppEntity(), {
        id: r.id,
        name: r.name,
        timezone: r.timezone,
        dimensions: r.dimensions,
        createdAt: r.created_at,
      }),
    );
  }

  /** The ids among `ids` that name existing apps (an app being deleted no longer counts). */
  async existingIds(ids: string[]): Promise<string[]> {
    const rows = (await this.repo.query(
      `SELECT id FROM apps WHERE id = ANY($1::uuid[]) AND deleting_since IS NULL`,
      [ids],
    )) as {
      id: string;
    }[];
    return rows.map((r) => r.id);
  }

  /** Renames an app; false when there is no such app (or it is being deleted). */
  async rename(id: string, name: string, manager: EntityManager): Promise<boolean> {
    // An UPDATE answers [rows, count] through TypeORM.
    const [, count] = (await manager.query(
      `UPDATE apps SET name = $2 WHERE id = $1 AND deleting_since IS NULL RETURNING id`,
      [id, name],
    )) as [unknown[], number];
    return count > 0;
  }

  /**
   * Marks an app as being deleted; returns its name, or null when there is no such app or its
   * deletion was already asked for.
   */
  async markDeleting(id: string, manager: EntityManager): Promise<string | null> {
    const [rows] = (await manager.query(
      `UPDATE apps SET deleting_since = now() WHERE id = $1 AND deleting_since IS NULL RETURNING name`,
      [id],
    )) as [{ name: string }[], number];
    return rows[0]?.name ?? null;
  }

  /** Id, name, time zone and declared dimensions of each existing app among `ids`, by name. */
  async namesOf(ids: string[]): Promise<AppSummary[]> {
    return (await this.repo.query(
      `SELECT id, name, timezone, dimensions FROM apps WHERE id = ANY($1::uuid[]) AND deleting_since IS NULL
        ORDER BY name, id`,
      [ids],
    )) as AppSummary[];
  }

  async piiSecret(appId: string): Promise<Buffer | null> {
    const rows = (await this.repo.query(`SELECT pii_secret FROM apps WHERE id = $1`, [appId])) as {
      pii_secret: Buffer;
    }[];
    return rows[0]?.pii_secret ?? null;
  }
}
