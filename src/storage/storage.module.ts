import { Module } from '@nestjs/common';
import { StorageCoreModule } from './storage-core.module';
import { PartitionRepository } from './partition.repository';
import { PartitionMaintenanceService } from './partition-maintenance.service';

/** Upkeep of the daily partitions of `events`: creation ahead of time, retention, filter indexes. */
@Module({
  imports: [StorageCoreModule],
  // The repository holds no state: the upkeep's instance and the core's behave as one.
  providers: [PartitionRepository, PartitionMaintenanceService],
  exports: [PartitionMaintenanceService, StorageCoreModule],
})
export class StorageModule {}
