/** A UUID in its canonical 8-4-4-4-12 hex form, either case. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** App ids are UUIDs, stored lower-case; a caller may send either case. */
export function normaliseAppId(appId: string): string {
  return appId.toLowerCase();
}
