import { ArgumentMetadata, Injectable, ValidationPipe } from '@nestjs/common';
import type { ValidationError } from 'class-validator';
import { AppError, FieldError, FieldErrorCode } from '@app/common/app-error';

/** class-validator constraint → the stable field-level `code` clients see. */
const CONSTRAINT_CODES: Record<string, FieldErrorCode> = {
  isDefined: 'required',
  isNotEmpty: 'required',
  isString: 'invalid_type',
  isUuid: 'invalid_format',
  isInt: 'not_an_integer',
  min: 'out_of_range',
  max: 'out_of_range',
  maxLength: 'too_long',
  isIn: 'invalid_value',
  matches: 'invalid_format',
  isInstant: 'invalid_timestamp',
  isRealDate: 'invalid_date',
  hasNoControlCharacters: 'invalid_value',
  whitelistValidation: 'unknown_parameter',
};

const PRIORITY = Object.keys(CONSTRAINT_CODES);
const priority = (constraint: string) => {
  const i = PRIORITY.indexOf(constraint);
  return i === -1 ? PRIORITY.length : i;
};

export function invalidQuery(errors: FieldError[]): AppError {
  const detail = errors.map((e) => `${e.field}: ${e.message}`).join('; ');
  return new AppError('invalid_query', detail || 'Invalid query parameters.', { errors });
}

function flatten(errors: ValidationError[]): FieldError[] {
  const out: FieldError[] = [];
  for (const error of errors) {
    // One clear reason per parameter: the most basic rule it broke (missing before malformed
    // before out of range), whatever order the decorators were declared in.
    const broken = Object.entries(error.constraints ?? {}).sort(([a], [b]) => priority(a) - priority(b));
    const [constraint, message] = broken[0] ?? ['invalid', 'is invalid'];
    out.push({
      field: error.property,
      code: CONSTRAINT_CODES[constraint] ?? 'invalid_value',
      message: constraint === 'whitelistValidation' ? 'is not a known query parameter' : message,
    });
  }
  return out;
}

/**
 * Validates a query DTO. Each parameter may appear once (`limit=1&limit=2` is a 400, not a
 * silent pick), and unknown parameters are refused so that a misspelt filter cannot silently
 * widen a query.
 */
@Injectable()
export class QueryValidationPipe extends ValidationPipe {
  constructor() {
    super({
      transform: true,
      whitelist: true,
      forbidNonWhitelisted: true,
      forbidUnknownValues: true,
      validationError: { target: false, value: false },
      exceptionFactory: (errors) => invalidQuery(flatten(errors)),
    });
  }

  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    if (metadata.type === 'query' && value && typeof value === 'object') {
      const repeated = Object.entries(value as Record<string, unknown>)
        .filter(([, v]) => typeof v !== 'string')
        .map(([field]): FieldError => ({ field, code: 'repeated', message: 'must be given at most once' }));
      if (repeated.length) throw invalidQuery(repeated);
    }
    return super.transform(value, metadata);
  }
}
