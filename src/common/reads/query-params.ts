import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsNotEmpty, IsOptional, IsString, IsUUID, MaxLength } from 'class-validator';
import { NO_CONTROL_CHARACTERS_PATTERN } from '@app/common/control-characters';
import { HasNoControlCharacters } from './query-validators';

export const TEST_MODES = ['false', 'true', 'all'] as const;
export type TestModeFilter = (typeof TEST_MODES)[number];

/** The query parameters both read endpoints share, declared once for validation and OpenAPI. */

/** `appId`: required, a UUID. */
export const AppIdParam = () =>
  applyDecorators(
    ApiProperty({ format: 'uuid', description: 'The app to read.' }),
    IsNotEmpty({ message: 'appId is required' }),
    IsString(),
    IsUUID('all', { message: 'appId must be a UUID' }),
  );

/** `eventName`: an exact name, at most 200 characters, no control characters. */
export const EventNameParam = () =>
  applyDecorators(
    ApiPropertyOptional({ maxLength: 200, pattern: NO_CONTROL_CHARACTERS_PATTERN }),
    IsOptional(),
    IsString(),
    MaxLength(200),
    HasNoControlCharacters(),
  );

/** `testMode`: `false` (default), `true` or `all`. */
export const TestModeParam = () =>
  applyDecorators(
    ApiPropertyOptional({ enum: TEST_MODES, default: 'false' }),
    IsOptional(),
    IsIn(TEST_MODES, { message: 'testMode must be false, true or all' }),
  );
