import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMinSize,
  IsArray,
  IsBoolean,
  IsInt,
  IsNotEmpty,
  IsNumber,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  Max,
  Min,
  ValidateBy,
  ValidateNested,
  ValidationOptions,
} from 'class-validator';
import { NO_CONTROL_CHARACTERS_PATTERN } from '@app/common/control-characters';
import { EVENT_LIMITS } from './ingest.limits';

// These DTOs are the documented schema of an ingest batch (and feed OpenAPI). The request path
// uses the hand-written EventValidator instead, for speed; a property test checks that both
// accept and reject the same events. The constraints below are written independently of that
// validator on purpose, so the comparison means something.

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function codePoints(s: string): number {
  return [...s].length;
}

function storable(s: string): boolean {
  return !s.includes('\u0000') && !LONE_SURROGATE.test(s);
}

/** At most `max` Unicode code points (class-validator's MaxLength counts differently). */
export function MaxCodePoints(max: number, options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'maxCodePoints',
      constraints: [max],
      validator: {
        validate: (v: unknown) => typeof v === 'string' && codePoints(v) <= max,
        defaultMessage: () => `$property must be at most ${max} characters`,
      },
    },
    options,
  );
}

/** Text PostgreSQL can store: no NUL and no unpaired surrogate. */
export function StorableText(options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'storableText',
      validator: {
        validate: (v: unknown) => typeof v === 'string' && storable(v),
        defaultMessage: () => '$property contains a NUL character or an unpaired surrogate',
      },
    },
    options,
  );
}

function isFlatPayload(v: unknown): boolean {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const keys = Object.keys(v);
  if (keys.length > EVENT_LIMITS.payloadMaxKeys) return false;
  return keys.every((key) => {
    if (key === '' || codePoints(key) > EVENT_LIMITS.payloadKeyMax || !storable(key)) return false;
    const value = (v as Record<string, unknown>)[key];
    switch (typeof value) {
      case 'string':
        return codePoints(value) <= EVENT_LIMITS.payloadStringMax && storable(value);
      case 'number':
        return Number.isFinite(value);
      case 'boolean':
        return true;
      default:
        // null is dropped with a warning; objects and arrays are nested values.
        return value === null;
    }
  });
}

/**
 * A flat map: at most 100 keys of 1–128 characters; values are strings of at most 1024
 * characters, finite numbers or booleans (null values are dropped).
 */
export function FlatPayload(options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'flatPayload',
      validator: {
        validate: isFlatPayload,
        defaultMessage: () =>
          `$property must be a flat object of at most ${EVENT_LIMITS.payloadMaxKeys} keys with string, number or boolean values`,
      },
    },
    options,
  );
}

const CONTEXT = { type: 'string', maxLength: EVENT_LIMITS.contextMax, nullable: true } as const;
const NO_CONTROL_CHARS = /^\P{Cc}*$/u;

/**
 * One analytics event. Absent and null mean the same for every optional field. Unknown fields
 * are ignored (with a warning), never an error.
 */
export class IngestEventDto {
  @ApiProperty({
    type: 'string',
    minLength: 1,
    maxLength: EVENT_LIMITS.eventNameMax,
    pattern: NO_CONTROL_CHARACTERS_PATTERN,
    example: 'Checkout.completed',
  })
  @IsString()
  @IsNotEmpty()
  @Matches(NO_CONTROL_CHARS, { message: 'eventName must not contain control characters' })
  @MaxCodePoints(EVENT_LIMITS.eventNameMax)
  @StorableText()
  eventName: string;

  @ApiPropertyOptional({
    type: 'string',
    maxLength: EVENT_LIMITS.identifierMax,
    nullable: true,
    pattern: NO_CONTROL_CHARACTERS_PATTERN,
    description:
      'Pseudonymous user id. An email address or phone number is replaced by a keyed hash (hmac:…). ' +
      'A control character rejects the event (invalid_value).',
  })
  @IsOptional()
  @IsString()
  @Matches(NO_CONTROL_CHARS, { message: 'anonymousUserId must not contain control characters' })
  @MaxCodePoints(EVENT_LIMITS.identifierMax)
  @StorableText()
  anonymousUserId?: string | null;

  @ApiPropertyOptional({
    type: 'string',
    maxLength: EVENT_LIMITS.identifierMax,
    nullable: true,
    pattern: NO_CONTROL_CHARACTERS_PATTERN,
    description: 'A control character rejects the event (invalid_value).',
  })
  @IsOptional()
  @IsString()
  @Matches(NO_CONTROL_CHARS, { message: 'sessionId must not contain control characters' })
  @MaxCodePoints(EVENT_LIMITS.identifierMax)
  @StorableText()
  sessionId?: string | null;

  @ApiPropertyOptional({
    type: 'string',
    minLength: 1,
    maxLength: EVENT_LIMITS.identifierMax,
    nullable: true,
    description: 'Client-chosen id; (app, eventId) is deduplicated for 7 days.',
  })
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxCodePoints(EVENT_LIMITS.identifierMax)
  @StorableText()
  eventId?: string | null;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    maximum: Number.MAX_SAFE_INTEGER,
    nullable: true,
    description: 'Epoch milliseconds. Absent: the receive time.',
  })
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(Number.MAX_SAFE_INTEGER)
  eventTime?: number | null;

  @ApiPropertyOptional({
    type: 'boolean',
    nullable: true,
    description: 'Forced to true when sent with a test key.',
  })
  @IsOptional()
  @IsBoolean()
  isTestMode?: boolean | null;

  @ApiPropertyOptional({ ...CONTEXT, example: 'ios' })
  @IsOptional()
  @IsString()
  @MaxCodePoints(EVENT_LIMITS.contextMax)
  @StorableText()
  platform?: string | null;

  @ApiPropertyOptional({ ...CONTEXT, example: '2.4.1' })
  @IsOptional()
  @IsString()
  @MaxCodePoints(EVENT_LIMITS.contextMax)
  @StorableText()
  appVersion?: string | null;

  @ApiPropertyOptional({ ...CONTEXT, example: '241', description: 'A string; a number is invalid_type.' })
  @IsOptional()
  @IsString()
  @MaxCodePoints(EVENT_LIMITS.contextMax)
  @StorableText()
  buildNumber?: string | null;

  @ApiPropertyOptional({ ...CONTEXT, example: '18.1' })
  @IsOptional()
  @IsString()
  @MaxCodePoints(EVENT_LIMITS.contextMax)
  @StorableText()
  osVersion?: string | null;

  @ApiPropertyOptional({ ...CONTEXT, example: 'iPhone16,2' })
  @IsOptional()
  @IsString()
  @MaxCodePoints(EVENT_LIMITS.contextMax)
  @StorableText()
  deviceModel?: string | null;

  @ApiPropertyOptional({
    type: 'string',
    nullable: true,
    example: 'en-US',
    description: 'BCP 47 (en_US is normalised to en-US). Another format is dropped with a warning.',
  })
  @IsOptional()
  @IsString()
  locale?: string | null;

  @ApiPropertyOptional({
    type: 'string',
    nullable: true,
    example: 'Europe/Paris',
    description: 'An IANA zone name or a ±HH:MM offset. Another format is dropped with a warning.',
  })
  @IsOptional()
  @IsString()
  timezone?: string | null;

  @ApiPropertyOptional({ type: 'number', nullable: true, description: 'A finite number.' })
  @IsOptional()
  @IsNumber({ allowNaN: false, allowInfinity: false })
  floatValue?: number | null;

  @ApiPropertyOptional({
    type: 'object',
    nullable: true,
    maxProperties: EVENT_LIMITS.payloadMaxKeys,
    // Not in the decorator's type, but copied into the schema as written.
    ...{ propertyNames: { minLength: 1, maxLength: EVENT_LIMITS.payloadKeyMax } },
    additionalProperties: {
      oneOf: [
        { type: 'string', maxLength: EVENT_LIMITS.payloadStringMax },
        { type: 'number' },
        { type: 'boolean' },
        { type: 'null' },
      ],
    },
    description:
      'Flat map. Null values are dropped with a warning; a nested object or array rejects the event.',
  })
  @IsOptional()
  @IsObject()
  @FlatPayload()
  payload?: Record<string, string | number | boolean | null> | null;

  @ApiPropertyOptional({
    type: 'string',
    nullable: true,
    examples: ['unlinked'],
    description:
      '"unlinked": stored without anonymousUserId and sessionId. Any other value is ignored with a warning.',
  })
  @IsOptional()
  privacyMode?: unknown;
}

/** The body of POST /api/ingest. */
export class IngestBatchDto {
  @ApiProperty({ type: [IngestEventDto], minItems: 1, description: 'At most INGEST_MAX_EVENTS (1000).' })
  @IsArray()
  @ArrayMinSize(1)
  // ValidateNested alone lets an array through as an event.
  @IsObject({ each: true })
  @ValidateNested({ each: true })
  @Type(() => IngestEventDto)
  events: IngestEventDto[];

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    nullable: true,
    description: 'Client clock at sending, epoch ms; corrects event times when off by more than 5 minutes.',
  })
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(Number.MAX_SAFE_INTEGER)
  sentAt?: number | null;
}
