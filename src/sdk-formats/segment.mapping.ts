import {
  flattenProperties,
  emptyBatch,
  floatValueOf,
  isObject,
  put,
  putTime,
  sentAtOf,
  stringOrUndefined,
  type AccountPseudonym,
  type MappedBatch,
  type MappingWarning,
  type TallyEvent,
} from './sdk-mapping';

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

/** A part of the context: the message's own, else the batch's (read, not merged, per message). */
function part(
  own: Record<string, unknown>,
  batch: Record<string, unknown>,
  key: string,
): Record<string, unknown> {
  const value = own[key] !== undefined ? own[key] : batch[key];
  return isObject(value) ? value : NONE;
}

/** A message's `context` fields (the batch's where the message has none) → Tally's context fields. */
function putContext(event: TallyEvent, own: Record<string, unknown>, batch: Record<string, unknown>): void {
  const os = part(own, batch, 'os');
  const app = part(own, batch, 'app');
  const device = part(own, batch, 'device');
  put(event, 'platform', os.name);
  put(event, 'osVersion', os.version);
  put(event, 'appVersion', app.version);
  // Segment's mobile SDKs send the build as a string; some send a number.
  put(event, 'buildNumber', typeof app.build === 'number' ? String(app.build) : app.build);
  put(event, 'deviceModel', device.model);
  put(event, 'locale', own.locale !== undefined ? own.locale : batch.locale);
  put(event, 'timezone', own.timezone !== undefined ? own.timezone : batch.timezone);
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
 * A Segment body → Tally events. `batch`/`b` take `{ batch: [message…], sentAt?, context? }`;
 * the other endpoints take one message whose type is the endpoint's. Returns null when the
 * envelope is not one (no `batch` array).
 */
export function mapSegmentBody(
  endpoint: SegmentEndpoint,
  body: Record<string, unknown>,
  pseudonym: AccountPseudonym,
): MappedBatch | null {
  const messages = messagesOf(endpoint, body);
  if (messages === null) return null;
  const batchContext = isObject(body.context) ? body.context : {};
  const out = emptyBatch(sentAtOf(body.sentAt));
  messages.forEach((message, index) => {
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
  });
  return out;
}
