import { Module } from '@nestjs/common';
import { UserSuppressions } from './user-suppressions';

/** One suppression list per process, however many modules import it. */
@Module({
  providers: [UserSuppressions],
  exports: [UserSuppressions],
})
export class UserSuppressionsModule {}
