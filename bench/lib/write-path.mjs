// The ingest write path without HTTP or validation, for the database ceiling: the service's own
// IngestRepository from the build, given a plain `pg` client in place of the TypeORM DataSource,
// so that the ceiling runs exactly the statement the service runs.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const DEDUP_WINDOW_MS = 7 * 86_400_000;

/** The shape the repository stores: what the validator hands it for a valid event. */
export function accepted(e, index, receivedAt) {
  return {
    index,
    eventId: e.eventId ?? null,
    eventName: e.eventName,
    anonymousUserId: e.anonymousUserId ?? null,
    sessionId: e.sessionId ?? null,
    eventTime: e.eventTime ?? null,
    ts: e.eventTime ?? receivedAt,
    isTestMode: e.isTestMode ?? false,
    platform: e.platform ?? null,
    appVersion: e.appVersion ?? null,
    buildNumber: e.buildNumber ?? null,
    osVersion: e.osVersion ?? null,
    deviceModel: e.deviceModel ?? null,
    locale: e.locale ?? null,
    timezone: e.timezone ?? null,
    floatValue: e.floatValue ?? null,
    payload: e.payload ?? null,
  };
}

/** `write(client, appId, events)` → rows stored, or null when the build has no ingest repository. */
export function loadWritePath(dist) {
  const file = path.join(dist, 'src', 'ingest', 'ingest.repository.js');
  if (!fs.existsSync(file)) return null;
  const { IngestRepository } = createRequire(file)(file);
  if (typeof IngestRepository !== 'function') return null;
  return async (client, appId, events) => {
    // The parts of a TypeORM DataSource the repository uses, over this one pg client.
    const query = async (sql, params) => (await client.query(sql, params)).rows;
    const repository = new IngestRepository({
      query,
      createQueryRunner: () => ({ connect: async () => client, release: async () => undefined, query }),
    });
    const receivedAt = Date.now();
    const batch = events.map((e, i) => accepted(e, i, receivedAt));
    const [duplicates] = await repository.insertBatches(
      [{ appId, receivedAt, events: batch }],
      DEDUP_WINDOW_MS,
      // The service's default: half of EXPORT_SETTLE_MS.
      5_000,
    );
    return batch.length - duplicates.length;
  };
}
