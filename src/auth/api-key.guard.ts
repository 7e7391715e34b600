import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { KeyAuthenticator } from './key-auth';

/** Admits requests that carry a valid API key (tly_api_…). Scope and app come after the rate limit. */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(private readonly auth: KeyAuthenticator) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    await this.auth.authenticate(context.switchToHttp().getRequest<Request>(), 'api');
    return true;
  }
}
