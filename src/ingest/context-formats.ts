// Locales and time zones repeat across events and apps, so their (relatively costly) Intl checks
// are cached. The caches are bounded and simply start over when full, which keeps a flood of
// distinct junk values from growing memory.
const CACHE_LIMIT = 2_000;

function boundedCache() {
  const map = new Map<string, string | null>();
  // Consecutive events usually repeat the same value: checked before the map.
  let lastKey: string | undefined;
  let lastValue: string | null | undefined;
  return {
    get(k: string): string | null | undefined {
      if (k === lastKey) return lastValue;
      const v = map.get(k);
      if (v !== undefined) {
        lastKey = k;
        lastValue = v;
      }
      return v;
    },
    set(k: string, v: string | null) {
      if (map.size >= CACHE_LIMIT) map.clear();
      map.set(k, v);
      lastKey = k;
      lastValue = v;
    },
  };
}

const locales = boundedCache();
const timezones = boundedCache();

// Cheap shape checks before Intl: a language tag is letters, digits and separators; a zone name
// is letters, digits, `_`, `+`, `-` and `/`.
const LOCALE_SHAPE = /^[A-Za-z]{2,8}(?:[-_][A-Za-z0-9]{1,8})*$/;
const ZONE_SHAPE = /^[A-Za-z][A-Za-z0-9_+\-/]{0,63}$/;
const OFFSET = /^[+-](?:(?:0\d|1[0-3]):[0-5]\d|14:00)$/;

/**
 * A BCP 47 language tag in canonical form (`en-us` → `en-US`), or null when the value is not
 * one. POSIX-style `en_US` is accepted and normalised.
 */
export function normaliseLocale(value: string): string | null {
  const cached = locales.get(value);
  if (cached !== undefined) return cached;
  let result: string | null = null;
  if (value.length <= 64 && LOCALE_SHAPE.test(value)) {
    try {
      result = Intl.getCanonicalLocales(value.replace(/_/g, '-'))[0] ?? null;
    } catch {
      result = null;
    }
  }
  locales.set(value, result);
  return result;
}

/**
 * An IANA time zone name in its canonical spelling (`europe/paris` → `Europe/Paris`), or a
 * `±HH:MM` UTC offset as sent; null when the value is neither.
 */
export function normaliseTimezone(value: string): string | null {
  const first = value.charCodeAt(0);
  // '+' or '-'
  if (first === 0x2b || first === 0x2d) return OFFSET.test(value) ? value : null;
  const cached = timezones.get(value);
  if (cached !== undefined) return cached;
  let result: string | null = null;
  if (ZONE_SHAPE.test(value)) {
    try {
      result = new Intl.DateTimeFormat('en-US', { timeZone: value }).resolvedOptions().timeZone;
    } catch {
      result = null;
    }
  }
  timezones.set(value, result);
  return result;
}
