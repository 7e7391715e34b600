import {
  flattenProperties,
  floatValueOf,
  isObject,
  mapAll,
  put,
  putTime,
  sentAtOf,
  stringOrUndefined,
  type AccountPseudonym,
  type BodyMapping,
  type MappedBatch,
  type MappingWarning,
  type TallyEvent,
} from './sdk-mapping';
import { WIRE_FIELDS } from '@app/common/events/event-fields';

/** The Segment HTTP Tracking API's endpoints under /api/segment/v1/, by path segment. */
export const SEGMENT_ENDPOINTS = {
  batch: 'batch',
  b: 'batch',
  track: 'track',
  t: 'track',
  page: 'page',
  p: 'page',
  screen: 'screen',
  s: 'screen',
  identify: 'identify',
  i: 'identify',
  group: 'group',
  g: 'group',
  alias: 'alias',
  a: 'alias',
} as const;

export type SegmentEndpoint = keyof typeof SEGMENT_ENDPOINTS;

/** Message types that are counted and not stored. */
const ACKNOWLEDGED = new Set(['identify', 'group', 'alias']);

export const SEGMENT_PAGE_EVENT = 'Page.viewed';
export const SEGMENT_SCREEN_EVENT = 'Screen.viewed';

const NONE: Record<string, unknown> = {};

/** Segment's context paths of the fields it carries as they are (the field table's `wire.segment`). */
const CONTEXT_FIELDS = WIRE_FIELDS.flatMap(({ name, wire }) =>
  wire.segment === undefined
    ? []
    : [{ name, path: wire.segment.split('.'), numberAsText: wire.numberAsText }],
);

/**
 * A message's `context` fields → Tally's fields. Each path's first part is the message's own,
 * else the batch's (read, not merged, per message).
 */
function putContext(event: TallyEvent, own: Record<string, unknown>, batch: Record<string, unknown>): void {
  for (const { name, path, numberAsText } of CONTEXT_FIELDS) {
    let value = own[path[0]] !== undefined ? own[path[0]] : batch[path[0]];
    for (let i = 1; i < path.length; i++) value = isObject(value) ? value[path[i]] : undefined;
    put(event, name, numberAsText && typeof value === 'number' ? String(value) : value);
  }
}

function eventNameOf(type: string, message: Record<string, unknown>): unknown {
  if (type === 'track') return message.event;
  return type === 'page' ? SEGMENT_PAGE_EVENT : SEGMENT_SCREEN_EVENT;
}

/**
 * One `track`, `page` or `screen` message → a Tally event. The account id (`userId`) is replaced
 * by its pseudonym here, before anything else sees it, and wins over `anonymousId`; traits, IP
 * addresses and user agents are never read.
 */
export function mapSegmentMessage(
  message: Record<string, unknown>,
  type: string,
  index: number,
  batchContext: Record<string, unknown>,
  pseudonym: AccountPseudonym,
  warnings: MappingWarning[],
): TallyEvent {
  const event: TallyEvent = {};
  put(event, 'eventName', eventNameOf(type, message));
  put(event, 'eventId', message.messageId);
  const userId = message.userId;
  if (typeof userId === 'string' && userId !== '') event.anonymousUserId = pseudonym(userId);
  else if (typeof userId === 'number') event.anonymousUserId = pseudonym(String(userId));
  else put(event, 'anonymousUserId', message.anonymousId);
  putTime(event, message.timestamp, index, 'timestamp', warnings);
  putContext(event, isObject(message.context) ? message.context : NONE, batchContext);
  const properties = message.properties;
  let payload = flattenProperties(properties, index, 'properties', warnings);
  const name = stringOrUndefined(message.name);
  // A copy: the flattened properties may be the message's own object.
  if (type !== 'track' && name !== undefined) payload = { ...payload, name };
  if (payload !== undefined) event.payload = payload;
  put(event, 'floatValue', floatValueOf(properties));
  return event;
}

function messagesOf(endpoint: SegmentEndpoint, body: Record<string, unknown>): unknown[] | null {
  if (SEGMENT_ENDPOINTS[endpoint] !== 'batch') return [{ ...body, type: SEGMENT_ENDPOINTS[endpoint] }];
  return Array.isArray(body.batch) ? body.batch : null;
}

/**
 * A Segment body as messages to map onto Tally events. `batch`/`b` take `{ batch: [message…],
 * sentAt?, context? }`; the other endpoints take one message whose type is the endpoint's.
 * Returns null when the envelope is not one (no `batch` array).
 */
export function segmentMapping(
  endpoint: SegmentEndpoint,
  body: Record<string, unknown>,
  pseudonym: AccountPseudonym,
): BodyMapping | null {
  const messages = messagesOf(endpoint, body);
  if (messages === null) return null;
  const batchContext = isObject(body.context) ? body.context : {};
  return {
    messages,
    sentAt: sentAtOf(body.sentAt),
    mapMessage(out, index) {
      const message = messages[index];
      if (!isObject(message)) {
        out.rejections.push({
          index,
          field: 'message',
          code: 'invalid_type',
          message: 'A message must be an object.',
        });
        return;
      }
      const type = message.type;
      if (typeof type === 'string' && ACKNOWLEDGED.has(type)) {
        out.acknowledged++;
      } else if (type === 'track' || type === 'page' || type === 'screen') {
        out.events.push(mapSegmentMessage(message, type, index, batchContext, pseudonym, out.warnings));
        out.messageIndexes.push(index);
      } else {
        out.rejections.push({
          index,
          field: 'type',
          code: 'invalid_value',
          message: 'type must be one of track, page, screen, identify, group or alias.',
        });
      }
    },
  };
}

/** A Segment body mapped at once; null when the envelope is not one. */
export function mapSegmentBody(
  endpoint: SegmentEndpoint,
  body: Record<string, unknown>,
  pseudonym: AccountPseudonym,
): MappedBatch | null {
  return mapAll(segmentMapping(endpoint, body, pseudonym));
}
