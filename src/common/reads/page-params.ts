import { applyDecorators } from '@nestjs/common';
import { ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 1000;

/** Only plain decimal digits become a number; anything else stays a string and fails `IsInt`. */
const toInteger = ({ value }: { value: unknown }) =>
  typeof value === 'string' && /^-?\d{1,7}$/.test(value) ? Number(value) : value;

/** `limit` of a paged listing: 1 to MAX_LIMIT, DEFAULT_LIMIT when absent. */
export const LimitParam = () =>
  applyDecorators(
    ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT }),
    IsOptional(),
    Transform(toInteger),
    IsInt({ message: 'limit must be an integer' }),
    Min(1, { message: `limit must be between 1 and ${MAX_LIMIT}` }),
    Max(MAX_LIMIT, { message: `limit must be between 1 and ${MAX_LIMIT}` }),
  );

/** `cursor` of a paged listing: the X-Next-Cursor of the previous page. */
export const CursorParam = () =>
  applyDecorators(
    ApiPropertyOptional({ description: 'The X-Next-Cursor of the previous page.' }),
    IsOptional(),
    IsString(),
    MaxLength(200),
  );
