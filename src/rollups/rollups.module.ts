import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { RollupsController } from './rollups.controller';
import { RollupsService } from './rollups.service';

@Module({
  imports: [AuthModule],
  controllers: [RollupsController],
  providers: [RollupsService],
  exports: [RollupsService],
})
export class RollupsModule {}
