import { AppError } from '@app/common/app-error';

const REALM = 'Bearer realm="tally"';

export function invalidKey(detail = 'The key is missing, malformed, unknown, revoked or expired.'): AppError {
  return new AppError('invalid_key', detail, {
    headers: { 'WWW-Authenticate': `${REALM}, error="invalid_token"` },
  });
}

export function wrongKeyType(expected: 'ingest' | 'api'): AppError {
  const detail =
    expected === 'ingest'
      ? 'This endpoint takes an ingest key (tly_live_… or tly_test_…), not an API key.'
      : 'This endpoint takes an API key (tly_api_…), not an ingest key.';
  return new AppError('wrong_key_type', detail, {
    headers: { 'WWW-Authenticate': `${REALM}, error="invalid_token"` },
  });
}

export function insufficientScope(scope: string): AppError {
  // `scope` is one scope, or several separated by spaces, any of which would do (RFC 6750).
  const named = scope.split(' ').join(' or ');
  return new AppError('insufficient_scope', `The key lacks the scope ${named}.`, {
    headers: { 'WWW-Authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"` },
    extra: { requiredScope: scope },
  });
}

/** Same answer whether or not the app exists, so a 403 reveals nothing about other apps. */
export function appForbidden(scope: string): AppError {
  return new AppError('app_forbidden', 'The key has no access to this app.', {
    headers: { 'WWW-Authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"` },
  });
}
