import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AppEntity } from './app.entity';
import { KeyEntity } from './key.entity';
import { AppRepository } from './app.repository';
import { KeyRepository } from './key.repository';
import { AppsService } from './apps.service';
import { KeysService } from './keys.service';
import { KeyVerifier } from './key-verifier';

/**
 * Apps and keys without HTTP: what the service and the admin CLI share. The guards, the request
 * limits and the last-used flush are the service's, in AuthModule.
 */
@Module({
  imports: [TypeOrmModule.forFeature([AppEntity, KeyEntity])],
  providers: [AppRepository, KeyRepository, AppsService, KeysService, KeyVerifier],
  exports: [AppsService, KeysService, KeyVerifier],
})
export class AuthCoreModule {}
