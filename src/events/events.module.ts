import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { RateLimitModule } from '@app/common/rate-limit/rate-limit.module';
import { EventsController } from './events.controller';
import { EventRepository } from './event.repository';
import { EventsService } from './events.service';
import { CursorSecretRepository } from '@app/common/reads/cursor-secret.repository';

@Module({
  imports: [AuthModule, RateLimitModule],
  controllers: [EventsController],
  providers: [EventRepository, EventsService, CursorSecretRepository],
})
export class EventsModule {}
