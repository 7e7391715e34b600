import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { RateLimitModule } from '@app/common/rate-limit/rate-limit.module';
import { EventsController } from './events.controller';
import { EventRepository } from './event.repository';
import { EventsService } from './events.service';
import { ReadsModule } from '@app/common/reads/reads.module';

@Module({
  imports: [ReadsModule, AuthModule, RateLimitModule],
  controllers: [EventsController],
  providers: [EventRepository, EventsService],
})
export class EventsModule {}
