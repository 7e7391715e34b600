export { TallyClient } from './client.js';
export type { BatchResult, ShutdownReport, TallyClientOptions, TallyStats } from './client.js';
export { TallyReader } from './reader.js';
export type {
  ActiveUsersQuery,
  BreakdownQuery,
  EventsQuery,
  ExportQuery,
  RollupsQuery,
  TallyReaderOptions,
  TestModeFilter,
} from './reader.js';
export { TallyError, parseRetryAfter } from './errors.js';
export type { TallyErrorInit, TallyFieldError } from './errors.js';
export { uuidv7 } from './uuid.js';
export type {
  ActiveUsersRow,
  BreakdownRow,
  Deletion,
  EventError,
  EventRecord,
  EventWarning,
  IngestResult,
  Problem,
  RollupRecord,
  TallyEvent,
} from './types.js';
