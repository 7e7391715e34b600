import { registerDecorator, ValidationOptions } from 'class-validator';
import { hasControlCharacter } from '@app/common/control-characters';
import { parseInstant, parseUtcDate } from './time-params';

function stringRule(name: string, message: string, test: (value: string) => boolean) {
  return (options?: ValidationOptions): PropertyDecorator =>
    (target, propertyName) =>
      registerDecorator({
        name,
        target: target.constructor,
        propertyName: propertyName as string,
        options: { message: `${String(propertyName)} ${message}`, ...options },
        validator: { validate: (value: unknown) => typeof value === 'string' && test(value) },
      });
}

/** Epoch milliseconds or ISO-8601 with an explicit offset (see parseInstant). */
export const IsInstant = stringRule(
  'isInstant',
  'must be epoch milliseconds or an ISO-8601 date or date-time with an offset',
  (v) => parseInstant(v) !== null,
);

/** A real calendar day, `YYYY-MM-DD`. */
export const IsRealDate = stringRule(
  'isRealDate',
  'must be a real date in the form YYYY-MM-DD',
  (v) => parseUtcDate(v) !== null,
);

/**
 * No control characters (the rule of common/control-characters): ingest never stores one in an
 * event name or identifier, so such a filter could only match nothing.
 */
export const HasNoControlCharacters = stringRule(
  'hasNoControlCharacters',
  'must not contain control characters',
  (v) => !hasControlCharacter(v),
);
