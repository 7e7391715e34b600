import { Module } from '@nestjs/common';
import { PartitionRepository } from './partition.repository';
import { PartitionsService } from './partitions.service';

/** The partitions of `events` as the erasure reads them, without their upkeep (StorageModule). */
@Module({
  providers: [PartitionRepository, PartitionsService],
  exports: [PartitionsService],
})
export class StorageCoreModule {}
