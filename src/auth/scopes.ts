/** The scopes an API key can grant. Kept apart from the entity so that light code can list them. */
export const KNOWN_SCOPES = [
  'events:read',
  'rollups:read',
  'events:export',
  'privacy:write',
  'plans:read',
  'plans:write',
] as const;
export type Scope = (typeof KNOWN_SCOPES)[number];
