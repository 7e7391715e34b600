import { InvalidArgumentError } from '@commander-js/extra-typings';
import { UUID } from '@app/common/ids';
import { isTimeZone } from '@app/common/timezones';

// Parsers for option and argument values. Each refuses a malformed value before anything is
// opened, with a message that commander puts after the option's name.

const DATE = /^\d{4}-\d{2}-\d{2}$/;

/** An app or key id, lower-cased. */
export function uuid(value: string): string {
  if (!UUID.test(value))
    throw new InvalidArgumentError('Expected a UUID such as 0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c.');
  return value.toLowerCase();
}

/** An app name, trimmed: refused when blank or too long, before the database is opened. */
export function appName(value: string): string {
  const trimmed = value.trim();
  if (trimmed.length < 1 || trimmed.length > 200)
    throw new InvalidArgumentError('An app name is 1 to 200 characters.');
  return trimmed;
}

/** Collects a repeatable UUID option into an array. */
export function uuids(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), uuid(value)];
}

/** Collects a repeatable option whose values come from a fixed list. */
export function oneOfEach<const T extends readonly string[]>(allowed: T) {
  return (value: string, previous: T[number][] | undefined): T[number][] => {
    if (!allowed.includes(value)) throw new InvalidArgumentError(`Allowed values are ${allowed.join(', ')}.`);
    return [...(previous ?? []), value as T[number]];
  };
}

/** A whole number from `min` to `max`. */
export function wholeNumber(min: number, max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || n < min || n > max) {
      throw new InvalidArgumentError(`Expected a whole number from ${min} to ${max}.`);
    }
    return n;
  };
}

/** A real calendar day, YYYY-MM-DD. */
export function utcDate(value: string): string {
  const d = new Date(`${value}T00:00:00Z`);
  if (!DATE.test(value) || Number.isNaN(d.getTime()) || d.toISOString().slice(0, 10) !== value) {
    throw new InvalidArgumentError('Expected a real date, YYYY-MM-DD.');
  }
  return value;
}

/** An IANA time zone name that Tally accepts (see common/timezones). */
export function timeZone(value: string): string {
  if (!isTimeZone(value)) {
    throw new InvalidArgumentError(
      `Unknown time zone "${value}": use an IANA name such as UTC or Europe/Berlin.`,
    );
  }
  return value;
}

/** An instant: a date (YYYY-MM-DD, midnight UTC), an ISO-8601 date-time, or epoch milliseconds. */
export function instantArg(value: string): Date {
  const at = /^\d+$/.test(value)
    ? new Date(Number(value))
    : DATE.test(value)
      ? new Date(`${utcDate(value)}T00:00:00Z`)
      : new Date(value);
  if (!/^\d/.test(value) || Number.isNaN(at.getTime())) {
    throw new InvalidArgumentError(
      'Expected a date (YYYY-MM-DD), an ISO-8601 date-time or epoch milliseconds.',
    );
  }
  return at;
}

/** `--expires-in <n>d`: a life of 1 to 3650 days, as a number of days. */
export function lifeInDays(value: string): number {
  const m = /^(\d{1,4})d$/.exec(value.trim());
  const days = m ? Number(m[1]) : NaN;
  if (!(days >= 1 && days <= 3650)) {
    throw new InvalidArgumentError('a life in days such as 90d, from 1d to 3650d');
  }
  return days;
}
