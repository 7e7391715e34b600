import { Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { AppError } from '@app/common/app-error';
import { AuthFailureLimiter } from './auth-failure.limiter';
import { attachKey, bearerToken, RequestKey } from './authenticated-request';
import { invalidKey, wrongKeyType } from './auth-errors';
import { KeysService } from './keys.service';

/** The steps both key guards share: throttle guessing, resolve the bearer key, check its kind. */
@Injectable()
export class KeyAuthenticator {
  constructor(
    private readonly keys: KeysService,
    private readonly failures: AuthFailureLimiter,
  ) {}

  async authenticate(req: Request, expected: 'ingest' | 'api'): Promise<RequestKey> {
    await this.failures.assertNotBlocked(req);
    try {
      const token = bearerToken(req);
      if (!token) throw invalidKey();
      const key = await this.keys.authenticate(token);
      if (!key) throw invalidKey();
      if (key.kind !== expected) throw wrongKeyType(expected);
      attachKey(req, key);
      return key;
    } catch (err) {
      // Only unknown or invalid keys count as guesses; a valid key of the wrong kind does not.
      if (err instanceof AppError && err.code === 'invalid_key') await this.failures.recordFailure(req);
      throw err;
    }
  }
}
