/** How long a rotated key keeps working unless told otherwise. */
export const DEFAULT_ROTATION_GRACE_DAYS = 7;
export const MAX_ROTATION_GRACE_DAYS = 365;

/** The result of replacing a key: when the old one stops, and the new secret (shown once). */
export interface KeyRotation {
  old: { id: string; expiresAt: string };
  new: { id: string; key: string };
}
