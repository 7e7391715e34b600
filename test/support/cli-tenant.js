// A tenant made through the admin CLI, as an operator would make one, for the plain Node scripts
// of test/ and bench/ (ESM, which import CommonJS named exports). Types are in cli-tenant.d.ts.
'use strict';

const READ_SCOPES = ['events:read', 'rollups:read'];

/**
 * An app named `name` with a live ingest key and an API key (and its id) that has `scopes` (both
 * read scopes by default). `run(args)` runs one admin command and resolves with the JSON document
 * it printed.
 */
async function makeCliTenant(run, name, scopes = READ_SCOPES) {
  const app = await run(['apps', 'create', '--name', name]);
  const ingest = await run(['keys', 'create-ingest', '--app', app.id]);
  const api = await run(['keys', 'create-api', '--app', app.id, ...scopes.flatMap((s) => ['--scope', s])]);
  return { appId: app.id, ingestKey: ingest.key, apiKey: api.key, apiKeyId: api.id };
}

module.exports = { makeCliTenant };
