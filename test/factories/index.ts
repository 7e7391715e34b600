import type { INestApplication } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import request from 'supertest';
import { AppsService } from '@app/auth/apps.service';
import { KeysService } from '@app/auth/keys.service';
import type { AuditActor } from '@app/audit/audit.types';

/** Who the tests' admin actions are recorded as. */
export const TEST_ACTOR: AuditActor = { type: 'cli', osUser: 'test' };

/** Each test makes its own apps and keys, so tests never depend on order or on cleanup. */
export async function makeApp(app: INestApplication, name = `app-${randomUUID().slice(0, 8)}`) {
  return app.get(AppsService).create(name, TEST_ACTOR);
}

export async function makeIngestKey(app: INestApplication, appId: string, mode: 'live' | 'test' = 'live') {
  return app.get(KeysService).createIngestKey(appId, mode, null, TEST_ACTOR);
}

export async function makeApiKey(
  app: INestApplication,
  appIds: string[],
  scopes: string[] = ['events:read', 'rollups:read'],
  expiresInDays: number | null = null,
) {
  return app.get(KeysService).createApiKey(appIds, scopes, expiresInDays, null, TEST_ACTOR);
}

/** An app with a live ingest key, a test ingest key and a read key with both scopes. */
export async function makeTenant(app: INestApplication) {
  const tenant = await makeApp(app);
  const live = await makeIngestKey(app, tenant.id, 'live');
  const test = await makeIngestKey(app, tenant.id, 'test');
  const api = await makeApiKey(app, [tenant.id]);
  return {
    app: tenant,
    appId: tenant.id,
    liveKey: live.key,
    testKey: test.key,
    apiKey: api.key,
    apiKeyId: api.id,
  };
}

export const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });

/** POST /api/ingest with `key` and a JSON body; a string body is sent as it is. */
export function postIngest(http: Server, key: string, body: unknown): request.Test {
  return request(http)
    .post('/api/ingest')
    .set(bearer(key))
    .set('Content-Type', 'application/json')
    .send(typeof body === 'string' ? body : JSON.stringify(body));
}
