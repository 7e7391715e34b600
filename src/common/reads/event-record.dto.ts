import { ApiProperty } from '@nestjs/swagger';
import type { EventRecord } from '@app/common/events/event-fields';

/**
 * One event as GET /api/v1/events returns it. Every field is present; absent values are null.
 * The OpenAPI schema of EventRecord (common/events/event-fields.ts); a test keeps the two equal.
 */
export class EventRecordDto implements EventRecord {
  @ApiProperty({
    description:
      'Server-assigned id, opaque and specific to the app: 22 base64url characters. Stable for an event; ' +
      'its order and value say nothing about other events or apps.',
    pattern: '^[A-Za-z0-9_-]{22}$',
  })
  id!: string;
  @ApiProperty({ format: 'uuid' })
  appId!: string;
  @ApiProperty()
  eventName!: string;
  @ApiProperty({ type: String, nullable: true })
  anonymousUserId!: string | null;
  @ApiProperty({ type: String, nullable: true })
  sessionId!: string | null;
  @ApiProperty({ type: 'integer', nullable: true, description: 'eventTime as the client sent it, epoch ms.' })
  eventTime!: number | null;
  @ApiProperty({ type: 'integer', description: 'Effective event time (after clock correction), epoch ms.' })
  timestamp!: number;
  @ApiProperty({ type: 'integer', description: 'When the service accepted the event, epoch ms.' })
  receivedAt!: number;
  @ApiProperty({ type: String, nullable: true })
  eventId!: string | null;
  @ApiProperty()
  isTestMode!: boolean;
  @ApiProperty({ type: String, nullable: true })
  platform!: string | null;
  @ApiProperty({ type: String, nullable: true })
  appVersion!: string | null;
  @ApiProperty({ type: String, nullable: true })
  buildNumber!: string | null;
  @ApiProperty({ type: String, nullable: true })
  osVersion!: string | null;
  @ApiProperty({ type: String, nullable: true })
  deviceModel!: string | null;
  @ApiProperty({ type: String, nullable: true })
  locale!: string | null;
  @ApiProperty({ type: String, nullable: true })
  timezone!: string | null;
  @ApiProperty({ type: Number, nullable: true })
  floatValue!: number | null;
  @ApiProperty({
    type: 'object',
    nullable: true,
    additionalProperties: { oneOf: [{ type: 'string' }, { type: 'number' }, { type: 'boolean' }] },
  })
  payload!: Record<string, string | number | boolean> | null;
}
