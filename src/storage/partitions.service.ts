import { Injectable } from '@nestjs/common';
import { PartitionRepository } from './partition.repository';

/** The daily partitions of `events` as other features see them (the erasure walks them). */
@Injectable()
export class PartitionsService {
  constructor(private readonly partitions: PartitionRepository) {}

  /** Names and first days of the existing partitions, oldest first. */
  list(): Promise<{ name: string; day: string }[]> {
    return this.partitions.list();
  }
}
