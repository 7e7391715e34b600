import { Module } from '@nestjs/common';
import { StorageCoreModule } from './storage-core.module';
import { PartitionMaintenanceService } from './partition-maintenance.service';

/** Upkeep of the daily partitions of `events`: creation ahead of time, retention, filter indexes. */
@Module({
  imports: [StorageCoreModule],
  providers: [PartitionMaintenanceService],
  exports: [PartitionMaintenanceService, StorageCoreModule],
})
export class StorageModule {}
