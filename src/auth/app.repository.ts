import { DataSource, EntityManager, Repository } from 'typeorm';
import { Injectable } from '@app/common/di';
import { AppEntity } from './app.entity';

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
    app: { id: string; name: string; piiSecret: Buffer },
    manager?: EntityManager,
  ): Promise<AppEntity> {
    const rows = (await (manager ?? this.db).query(
      `INSERT INTO apps (id, name, pii_secret) VALUES ($1, $2, $3) RETURNING id, name, created_at`,
      [app.id, app.name, app.piiSecret],
    )) as { id: string; name: string; created_at: Date }[];
    return Object.assign(new AppEntity(), {
      id: rows[0].id,
      name: rows[0].name,
      createdAt: rows[0].created_at,
    });
  }

  listAll(): Promise<AppEntity[]> {
    return this.repo.find({ order: { createdAt: 'ASC', id: 'ASC' } });
  }

  /** The ids among `ids` that name existing apps. */
  async existingIds(ids: string[]): Promise<string[]> {
    const rows = (await this.repo.query(`SELECT id FROM apps WHERE id = ANY($1::uuid[])`, [ids])) as {
      id: string;
    }[];
    return rows.map((r) => r.id);
  }

  /** Id and name of each existing app among `ids`, by name. */
  async namesOf(ids: string[]): Promise<{ id: string; name: string }[]> {
    return (await this.repo.query(`SELECT id, name FROM apps WHERE id = ANY($1::uuid[]) ORDER BY name, id`, [
      ids,
    ])) as { id: string; name: string }[];
  }

  async piiSecret(appId: string): Promise<Buffer | null> {
    const rows = (await this.repo.query(`SELECT pii_secret FROM apps WHERE id = $1`, [appId])) as {
      pii_secret: Buffer;
    }[];
    return rows[0]?.pii_secret ?? null;
  }
}
