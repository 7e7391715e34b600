import { Module } from '@nestjs/common';
import { PartitionRepository } from './partition.repository';

/** The partitions of `events` as the erasure reads them, without their upkeep (StorageModule). */
@Module({
  providers: [PartitionRepository],
  exports: [PartitionRepository],
})
export class StorageCoreModule {}
