import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { EventsController } from './events.controller';
import { PartitionRepository } from './partition.repository';
import { PartitionMaintenanceService } from './partition-maintenance.service';

@Module({
  imports: [AuthModule],
  controllers: [EventsController],
  providers: [PartitionRepository, PartitionMaintenanceService],
  exports: [PartitionMaintenanceService],
})
export class EventsModule {}
