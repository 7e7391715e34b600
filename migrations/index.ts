import { InitialSchema1763780000000 } from './1763780000000-initial-schema';
import { RollupFinalisationIndex1763790000000 } from './1763790000000-rollup-finalisation-index';
import { DedupBytewiseIds1763800000000 } from './1763800000000-dedup-bytewise-ids';
import { EventsTestModeIndex1763810000000 } from './1763810000000-events-test-mode-index';
import { EventsBloomExtension1763820000000 } from './1763820000000-events-bloom-extension';
import { EventsLookupsWithoutBloom1763830000000 } from './1763830000000-events-lookups-without-bloom';
import { EventsPayloadJson1763840000000 } from './1763840000000-events-payload-json';
import { EventsNameIndexEndedDays1763850000000 } from './1763850000000-events-name-index-ended-days';
import { AuditLog1763860000000 } from './1763860000000-audit-log';
import { Erasure1763880000000 } from './1763880000000-erasure';
import { AppTimezones1763890000000 } from './1763890000000-app-timezones';
import { IngestCommitHorizon1763900000000 } from './1763900000000-ingest-commit-horizon';
import { TrackingPlans1763910000000 } from './1763910000000-tracking-plans';
import { PlanQuality1763910100000 } from './1763910100000-plan-quality';
import { QuarantineBounds1763920000000 } from './1763920000000-quarantine-bounds';
import { AppDeletion1763930000000 } from './1763930000000-app-deletion';
import { DeletionUserKeys1763940000000 } from './1763940000000-deletion-user-keys';
import { CitusDistribution1764200000000 } from './1764200000000-citus-distribution';
import { Insights1764300000000 } from './1764300000000-insights';
import { QuarantineLeanIndex1764400000000 } from './1764400000000-quarantine-lean-index';
import { BreakdownMemberLists1764500000000 } from './1764500000000-breakdown-member-lists';
import { InsightIdPacks1764600000000 } from './1764600000000-insight-id-packs';
import { CitusShardListStorage1764700000000 } from './1764700000000-citus-shard-list-storage';
import { InsightDaySources1764800000000 } from './1764800000000-insight-day-sources';
import { InsightDayParts1764900000000 } from './1764900000000-insight-day-parts';

/** Every migration, in order. The DataSource lists them explicitly so that the compiled
 * service, the CLI and the tests (which run TypeScript) load the same classes. */
export const MIGRATIONS = [
  InitialSchema1763780000000,
  RollupFinalisationIndex1763790000000,
  DedupBytewiseIds1763800000000,
  EventsTestModeIndex1763810000000,
  EventsBloomExtension1763820000000,
  EventsLookupsWithoutBloom1763830000000,
  EventsPayloadJson1763840000000,
  EventsNameIndexEndedDays1763850000000,
  AuditLog1763860000000,
  Erasure1763880000000,
  AppTimezones1763890000000,
  IngestCommitHorizon1763900000000,
  TrackingPlans1763910000000,
  PlanQuality1763910100000,
  QuarantineBounds1763920000000,
  AppDeletion1763930000000,
  DeletionUserKeys1763940000000,
  CitusDistribution1764200000000,
  Insights1764300000000,
  QuarantineLeanIndex1764400000000,
  BreakdownMemberLists1764500000000,
  InsightIdPacks1764600000000,
  CitusShardListStorage1764700000000,
  InsightDaySources1764800000000,
  InsightDayParts1764900000000,
];
