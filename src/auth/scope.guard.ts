import { CanActivate, ExecutionContext, Injectable, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Request } from 'express';
import type { Scope } from './key.entity';
import { normaliseAppId } from '@app/common/ids';
import { requestKey } from './authenticated-request';
import { appForbidden, insufficientScope } from './auth-errors';

const SCOPE = 'tally:scope';

/** Names the scope a read endpoint needs, or the scopes of which it needs any one. */
export const RequireScope = (scope: Scope | readonly Scope[]) => SetMetadata(SCOPE, scope);

/**
 * Checks the scope, then that the `appId` query parameter is one of the key's apps. A missing
 * or repeated appId is left to query validation (400).
 */
@Injectable()
export class ScopeGuard implements CanActivate {
  constructor(private readonly reflector: Reflector) {}

  canActivate(context: ExecutionContext): boolean {
    const required = this.reflector.getAllAndOverride<Scope | readonly Scope[] | undefined>(SCOPE, [
      context.getHandler(),
      context.getClass(),
    ]);
    if (!required) throw new Error('ScopeGuard needs @RequireScope');
    const scopes: readonly Scope[] = typeof required === 'string' ? [required] : required;
    const scope = scopes.join(' ');
    const req = context.switchToHttp().getRequest<Request>();
    const key = requestKey(req);
    if (!scopes.some((s) => key.scopes.includes(s))) throw insufficientScope(scope);
    const appId = req.query.appId;
    if (typeof appId === 'string' && appId !== '' && !key.appIds.includes(normaliseAppId(appId))) {
      throw appForbidden(scope);
    }
    return true;
  }
}
