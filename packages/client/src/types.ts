import type { components } from './generated/openapi.js';

/** One event as the ingest endpoint accepts it (generated from docs/openapi.json). */
export type TallyEvent = components['schemas']['IngestEventDto'];
/** The 200 answer of POST /api/ingest. */
export type IngestResult = components['schemas']['IngestResultDto'];
export type EventError = components['schemas']['EventErrorDto'];
export type EventWarning = components['schemas']['EventWarningDto'];
/** One stored event as GET /api/v1/events returns it. */
export type EventRecord = components['schemas']['EventRecordDto'];
/** One row of GET /api/v1/rollups. */
export type RollupRecord = components['schemas']['RollupRecordDto'];
/** One bucket of active users. */
export type ActiveUsersRow = components['schemas']['ActiveUsersRowDto'];
/** One row of a breakdown. */
export type BreakdownRow = components['schemas']['BreakdownRowDto'];
export type Problem = components['schemas']['Problem'];
/** A deletion of users' data, as POST and GET /api/v1/deletions return it. */
export type Deletion = components['schemas']['DeletionRecordDto'];
