import type { EventIssues } from './event-issues';
import { EVENT_LIMITS, REDACTED } from './ingest.limits';
import type { Payload, PayloadValue, PiiPolicy } from './ingest.types';
import { detectPii } from './pii';
import { SCALAR_BOUND, TEXT_OK, TEXT_TOO_LONG, fieldName, scanText, stringBound } from './text-rules';

/** A value to leave out of the stored payload. */
const DROP = Symbol('drop');

/**
 * The payload rules: at most `payloadMaxKeys` flat keys of bounded length, values that are
 * strings (bounded, storable, and through the PII guard), finite numbers or booleans; nulls are
 * dropped. `check` reports issues to `issues` and leaves, in `bound`, an upper bound of the
 * payload's serialized size.
 */
export class PayloadRules {
  /** The serialized-size bound of the last payload checked. */
  bound = 0;

  constructor(
    private readonly issues: EventIssues,
    private readonly policy: PiiPolicy,
  ) {}

  /** The payload to store (the same object when nothing changes), or null when it is rejected. */
  check(p: Record<string, unknown>): Payload | null {
    const { payloadMaxKeys } = EVENT_LIMITS;
    let count = 0;
    this.bound = 2;
    // Keys whose value is replaced (REDACTED) or dropped; null while nothing changes.
    let changes: Map<string, string | typeof DROP> | null = null;
    for (const key in p) {
      if (++count > payloadMaxKeys) {
        this.issues.error('payload', 'too_many_keys', `payload has more than ${payloadMaxKeys} keys.`);
        return null;
      }
      this.checkKey(key);
      const change = this.checkValue(key, p[key]);
      if (change !== undefined) (changes ??= new Map()).set(key, change);
    }
    return changes === null ? (p as Payload) : withChanges(p, changes);
  }

  private checkKey(key: string): void {
    const { payloadKeyMax } = EVENT_LIMITS;
    this.bound += stringBound(key) + 2;
    if (key.length === 0) {
      this.issues.error('payload', 'invalid_value', 'payload keys must not be empty.');
      return;
    }
    const status = scanText(key, payloadKeyMax, false);
    if (status === TEXT_TOO_LONG) {
      this.issues.error(
        fieldName('payload.', key),
        'too_long',
        `payload keys are at most ${payloadKeyMax} characters.`,
      );
    } else if (status !== TEXT_OK) {
      this.issues.error(
        fieldName('payload.', key),
        'unstorable_value',
        'payload key contains a NUL character or an unpaired surrogate.',
      );
    }
  }

  /** Checks one value; returns its replacement when the stored payload must differ. */
  private checkValue(key: string, v: unknown): string | typeof DROP | undefined {
    if (typeof v === 'string') {
      this.bound += stringBound(v);
      return this.checkString(key, v);
    }
    this.bound += SCALAR_BOUND;
    if (typeof v === 'number') {
      if (!Number.isFinite(v))
        this.issues.error(fieldName('payload.', key), 'invalid_value', 'payload numbers must be finite.');
    } else if (v === null) {
      this.issues.warn(fieldName('payload.', key), 'null_value_dropped', 'null payload value dropped.');
      return DROP;
    } else if (typeof v !== 'boolean') {
      this.issues.error(
        fieldName('payload.', key),
        'nested_value',
        'payload values must be a string, a number or a boolean.',
      );
    }
    return undefined;
  }

  /** A string value: its bounds, then the PII guard (reject, or redact with a warning). */
  private checkString(key: string, v: string): string | undefined {
    const field = fieldName('payload.', key);
    if (!this.issues.checkText(field, v, EVENT_LIMITS.payloadStringMax, false)) return undefined;
    if (this.policy === 'allow' || detectPii(v) === null) return undefined;
    if (this.policy === 'reject') {
      this.issues.error(field, 'pii_detected', 'Looks like an email address, phone number or card number.');
      return undefined;
    }
    this.issues.warn(
      field,
      'pii_redacted',
      'Looked like an email address, phone number or card number; replaced.',
    );
    return REDACTED;
  }
}

/** A null-prototype copy with `changes` applied, so that keys such as "__proto__" stay plain data. */
function withChanges(p: Record<string, unknown>, changes: Map<string, string | typeof DROP>): Payload {
  const out = Object.create(null) as Payload;
  for (const key in p) {
    const change = changes.get(key);
    if (change === undefined) out[key] = p[key] as PayloadValue;
    else if (change !== DROP) out[key] = change;
  }
  return out;
}
