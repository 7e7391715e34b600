import { Module } from '@nestjs/common';
import { AuthModule } from './auth.module';
import { KeyRevocationListener } from './key-revocation.listener';
import { KeyRevocationRepository } from './key-revocation.repository';

/** The server's side of revocation: listen, and drop revoked keys from the cache at once. */
@Module({
  imports: [AuthModule],
  providers: [KeyRevocationRepository, KeyRevocationListener],
})
export class KeyRevocationModule {}
