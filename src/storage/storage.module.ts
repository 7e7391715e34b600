import { Module } from '@nestjs/common';
import { PartitionRepository } from './partition.repository';
import { PartitionMaintenanceService } from './partition-maintenance.service';

/** Upkeep of the daily partitions of `events`: creation ahead of time, retention, filter indexes. */
@Module({
  providers: [PartitionRepository, PartitionMaintenanceService],
  exports: [PartitionMaintenanceService, PartitionRepository],
})
export class StorageModule {}
