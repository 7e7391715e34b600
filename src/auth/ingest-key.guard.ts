import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { KeyAuthenticator } from './key-auth';

/** Admits requests that carry a valid ingest key (tly_live_… or tly_test_…). */
@Injectable()
export class IngestKeyGuard implements CanActivate {
  constructor(private readonly auth: KeyAuthenticator) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    await this.auth.authenticate(context.switchToHttp().getRequest<Request>(), 'ingest');
    return true;
  }
}
