import { AppError } from '@app/common/app-error';
import { canonicalTimeZone, isTimeZone } from '@app/common/timezones';

/**
 * Refuses a name that is not an IANA time zone, naming it (`invalid_body`: exit 2 in the CLI);
 * returns its usual spelling.
 */
export function assertTimeZone(zone: string): string {
  if (!isTimeZone(zone)) {
    throw new AppError(
      'invalid_body',
      `Unknown time zone "${zone}": use an IANA name such as UTC, Europe/Berlin or America/New_York.`,
    );
  }
  return canonicalTimeZone(zone);
}
