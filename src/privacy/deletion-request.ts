import { AppError, FieldError } from '@app/common/app-error';
import { normaliseAppId, UUID } from '@app/common/ids';
import { EVENT_LIMITS } from '@app/ingest/ingest.limits';
import { hasControlCharacter } from '@app/common/control-characters';

export const MAX_USERS_PER_DELETION = 1_000;

export interface DeletionRequest {
  appId: string;
  /** Distinct, in the order given. */
  anonymousUserIds: string[];
  /** Account ids (Segment `userId`, PostHog `distinct_id`), raw: pseudonymised before matching. */
  userIds: string[];
  suppress: boolean;
}

function checkUserIds(value: unknown, name: string, errors: FieldError[]): string[] {
  if (!Array.isArray(value)) {
    errors.push({ field: name, code: 'invalid_type', message: `${name} must be an array.` });
    return [];
  }
  if (value.length < 1 || value.length > MAX_USERS_PER_DELETION) {
    errors.push({
      field: name,
      code: 'invalid_value',
      message: `${name} holds 1 to ${MAX_USERS_PER_DELETION} ids.`,
    });
    return [];
  }
  const ids = new Set<string>();
  value.forEach((id: unknown, i) => {
    const field = `${name}[${i}]`;
    if (typeof id !== 'string') {
      errors.push({ field, code: 'invalid_type', message: 'Each id must be a string.' });
    } else if (id.length < 1 || id.length > EVENT_LIMITS.identifierMax) {
      errors.push({
        field,
        code: 'invalid_value',
        message: `Each id is 1 to ${EVENT_LIMITS.identifierMax} characters.`,
      });
    } else if (hasControlCharacter(id)) {
      // Ingest never stores one in a user id, and PostgreSQL refuses NUL in text.
      errors.push({ field, code: 'invalid_value', message: 'An id must not contain control characters.' });
    } else {
      ids.add(id);
    }
  });
  return [...ids];
}

const absent = (v: unknown) => v === undefined || v === null;

/** `anonymousUserIds` and `userIds` (account ids): at least one of them, 1 to 1,000 ids in all. */
function checkUsers(b: Record<string, unknown>, errors: FieldError[]) {
  if (absent(b.anonymousUserIds) && absent(b.userIds)) {
    errors.push({
      field: 'anonymousUserIds',
      code: 'missing_field',
      message: 'anonymousUserIds or userIds is required.',
    });
    return { anonymousUserIds: [], userIds: [] };
  }
  const anonymousUserIds = absent(b.anonymousUserIds)
    ? []
    : checkUserIds(b.anonymousUserIds, 'anonymousUserIds', errors);
  const userIds = absent(b.userIds) ? [] : checkUserIds(b.userIds, 'userIds', errors);
  if (anonymousUserIds.length + userIds.length > MAX_USERS_PER_DELETION) {
    errors.push({
      field: 'userIds',
      code: 'invalid_value',
      message: `anonymousUserIds and userIds hold at most ${MAX_USERS_PER_DELETION} ids in all.`,
    });
  }
  return { anonymousUserIds, userIds };
}

/** Checks the body of POST /api/v1/deletions: 400 `invalid_body` with every field error. */
export function parseDeletionRequest(body: unknown): DeletionRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new AppError('invalid_body', 'The body must be a JSON object.', {
      errors: [{ field: 'body', code: 'invalid_type', message: 'The body must be a JSON object.' }],
    });
  }
  const b = body as Record<string, unknown>;
  const errors: FieldError[] = [];
  let appId = '';
  if (b.appId === undefined || b.appId === null) {
    errors.push({ field: 'appId', code: 'missing_field', message: 'appId is required.' });
  } else if (typeof b.appId !== 'string') {
    errors.push({ field: 'appId', code: 'invalid_type', message: 'appId must be a string.' });
  } else if (!UUID.test(b.appId)) {
    errors.push({ field: 'appId', code: 'invalid_format', message: 'appId must be a UUID.' });
  } else {
    appId = normaliseAppId(b.appId);
  }
  const { anonymousUserIds, userIds } = checkUsers(b, errors);
  let suppress = true;
  if (b.suppress !== undefined && b.suppress !== null) {
    if (typeof b.suppress === 'boolean') suppress = b.suppress;
    else errors.push({ field: 'suppress', code: 'invalid_type', message: 'suppress must be a boolean.' });
  }
  if (errors.length) {
    throw new AppError('invalid_body', 'The deletion request is invalid; nothing was done.', { errors });
  }
  return { appId, anonymousUserIds, userIds, suppress };
}
