import { Module } from '@nestjs/common';
import { AuthModule } from '@app/auth/auth.module';
import { ReadsModule } from '@app/common/reads/reads.module';
import { RateLimitModule } from '@app/common/rate-limit/rate-limit.module';
import { DeletionsController } from './deletions.controller';
import { PrivacyCoreModule } from './privacy-core.module';
import { PrivacyListener } from './privacy.listener';

/**
 * Erasure of users' data and the suppression list (docs/security.md, "Privacy"): the endpoints,
 * and the listener that runs deletions and replays the erasure ledger at boot. The steps and
 * their order are in PrivacyCoreModule.
 */
@Module({
  imports: [PrivacyCoreModule, ReadsModule, AuthModule, RateLimitModule],
  controllers: [DeletionsController],
  providers: [PrivacyListener],
})
export class PrivacyModule {}
