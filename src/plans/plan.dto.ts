import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { FLOAT_VALUE_RULES, PLAN_MODES, UNPLANNED_POLICIES } from './plan.types';
import type { EventDefinition, FloatValueRule, PlanMode, UnplannedPolicy } from './plan.types';

export class EventDefinitionDto {
  @ApiPropertyOptional({ maxLength: 1000 })
  description?: string;
  @ApiPropertyOptional({ enum: FLOAT_VALUE_RULES, default: 'optional' })
  floatValue?: FloatValueRule;
  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: true,
    description:
      'A JSON Schema (draft 2020-12) of the payload object. Patterns run on a linear-time engine (RE2 syntax).',
  })
  payload?: EventDefinition['payload'];
}

/** A tracking plan as sent with PUT /api/v1/plan or a dry run. */
export class PlanBodyDto {
  @ApiProperty({ enum: PLAN_MODES })
  mode!: PlanMode;
  @ApiPropertyOptional({ enum: UNPLANNED_POLICIES, default: 'allow' })
  unplanned?: UnplannedPolicy;
  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: { $ref: '#/components/schemas/EventDefinitionDto' },
    description: 'Event definitions by event name.',
  })
  events?: Record<string, EventDefinitionDto>;
}

/** An app's current plan, as GET and PUT /api/v1/plan answer. */
export class PlanDto {
  @ApiProperty({ format: 'uuid' })
  appId!: string;
  @ApiProperty({
    type: 'integer',
    description: 'The plan version (also the ETag); 0 when the app has no plan.',
  })
  version!: number;
  @ApiProperty({ enum: PLAN_MODES })
  mode!: PlanMode;
  @ApiProperty({ enum: UNPLANNED_POLICIES })
  unplanned!: UnplannedPolicy;
  @ApiProperty({
    type: 'object',
    additionalProperties: { $ref: '#/components/schemas/EventDefinitionDto' },
  })
  events!: Record<string, EventDefinitionDto>;
  @ApiProperty({ type: 'integer', nullable: true, description: 'When this version was stored, epoch ms.' })
  createdAt!: number | null;
}
