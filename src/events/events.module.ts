import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { EventsController } from './events.controller';
import { EventRepository } from './event.repository';
import { EventsService } from './events.service';
import { PartitionRepository } from './partition.repository';
import { PartitionMaintenanceService } from './partition-maintenance.service';

@Module({
  imports: [AuthModule],
  controllers: [EventsController],
  providers: [EventRepository, EventsService, PartitionRepository, PartitionMaintenanceService],
  exports: [PartitionMaintenanceService],
})
export class EventsModule {}
