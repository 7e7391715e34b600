import { registerDecorator, ValidationOptions } from 'class-validator';
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
 * No control characters: PostgreSQL cannot hold NUL in text, and no event name or id stored by
 * ingest contains one, so such a filter could only fail or match nothing.
 */
export const HasNoControlCharacters = stringRule(
  'hasNoControlCharacters',
  'must not contain control characters',
  // eslint-disable-next-line no-control-regex
  (v) => !/[\u0000-\u001f\u007f]/.test(v),
);
