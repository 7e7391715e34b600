import {
  flattenInto,
  floatValueOf,
  isObject,
  mapAll,
  put,
  putTime,
  sentAtOf,
  type AccountPseudonym,
  type BodyMapping,
  type FlattenContext,
  type MappedBatch,
  type MappingWarning,
  type TallyEvent,
} from './sdk-mapping';
import { WIRE_FIELDS, type WireField } from '@app/common/events/event-fields';

/** PostHog events that are counted and not stored (person and group updates). */
const ACKNOWLEDGED = new Set(['$identify', '$create_alias', '$groupidentify', '$set']);

/** `$`-properties → the fields they carry (the field table's `wire.posthog`). */
const SPECIAL_PROPERTIES: Record<string, WireField> = Object.assign(
  Object.create(null) as object,
  Object.fromEntries(WIRE_FIELDS.map((f) => [f.wire.posthog, f])),
);

const DOLLAR = 0x24;

/**
 * Reads the properties in one pass: `$`-properties onto Tally fields (the others, `$set` and
 * `$set_once` included, never stored), and the rest, flattened, into the payload, except the
 * copies of the key (`token`, `api_key`) and of the account id (`distinct_id`) that browser SDKs
 * put in every event's properties.
 */
function putProperties(event: TallyEvent, properties: Record<string, unknown>, ctx: FlattenContext): void {
  let payload: Record<string, unknown> | undefined;
  for (const key in properties) {
    if (!Object.hasOwn(properties, key)) continue;
    const value = properties[key];
    if (key.charCodeAt(0) === DOLLAR) {
      const to = SPECIAL_PROPERTIES[key];
      if (to !== undefined)
        put(event, to.name, to.wire.numberAsText && typeof value === 'number' ? String(value) : value);
    } else if (key !== 'token' && key !== 'api_key' && key !== 'distinct_id') {
      flattenInto((payload ??= {}), value, key, 0, ctx);
    }
  }
  if (payload !== undefined && Object.keys(payload).length) event.payload = payload;
}

function accountIdOf(event: Record<string, unknown>, properties: Record<string, unknown>): string | null {
  const id = event.distinct_id ?? event.distinctId ?? properties.distinct_id;
  if (typeof id === 'string' && id !== '') return id;
  if (typeof id === 'number') return String(id);
  return null;
}

/**
 * One PostHog event → a Tally event. Every `distinct_id` is an account id: it is replaced by its
 * pseudonym here, before anything else sees it.
 */
export function mapPostHogEvent(
  message: Record<string, unknown>,
  index: number,
  pseudonym: AccountPseudonym,
  warnings: MappingWarning[],
): TallyEvent {
  const properties = isObject(message.properties) ? message.properties : {};
  const event: TallyEvent = {};
  put(event, 'eventName', message.event);
  put(event, 'eventId', message.uuid);
  const account = accountIdOf(message, properties);
  if (account !== null) event.anonymousUserId = pseudonym(account);
  putTime(event, message.timestamp, index, 'timestamp', warnings);
  putProperties(event, properties, { index, source: 'properties', warnings });
  put(event, 'floatValue', floatValueOf(properties));
  return event;
}

/** The events of a capture body: `{ batch: […] }`, an array, or one event. */
function eventsOf(body: unknown): unknown[] | null {
  if (Array.isArray(body)) return body;
  if (!isObject(body)) return null;
  if (body.batch !== undefined) return Array.isArray(body.batch) ? body.batch : null;
  return body.event !== undefined ? [body] : null;
}

/**
 * A PostHog capture body (`batch/`, `capture/`, `e/`, `i/v0/e/`) as messages to map onto Tally
 * events. Returns null when the body holds no event at all.
 */
export function postHogMapping(body: unknown, pseudonym: AccountPseudonym): BodyMapping | null {
  const messages = eventsOf(body);
  if (messages === null) return null;
  return {
    messages,
    sentAt: isObject(body) ? sentAtOf(body.sent_at ?? body.sentAt) : null,
    mapMessage(out, index) {
      const message = messages[index];
      if (!isObject(message)) {
        out.rejections.push({
          index,
          field: 'event',
          code: 'invalid_type',
          message: 'An event must be an object.',
        });
      } else if (typeof message.event === 'string' && ACKNOWLEDGED.has(message.event)) {
        out.acknowledged++;
      } else {
        out.events.push(mapPostHogEvent(message, index, pseudonym, out.warnings));
        out.messageIndexes.push(index);
      }
    },
  };
}

/** A PostHog capture body mapped at once; null when it holds no event at all. */
export function mapPostHogBody(body: unknown, pseudonym: AccountPseudonym): MappedBatch | null {
  return mapAll(postHogMapping(body, pseudonym));
}

/** The key a PostHog body carries: `api_key` or `token`, on the body or its first event. */
export function postHogKeyOf(body: unknown): string | null {
  const first = Array.isArray(body)
    ? body[0]
    : isObject(body) && Array.isArray(body.batch)
      ? body.batch[0]
      : body;
  for (const holder of [body, first, isObject(first) ? first.properties : undefined]) {
    if (!isObject(holder)) continue;
    const key = holder.api_key ?? holder.token;
    if (typeof key === 'string' && key !== '') return key;
  }
  return null;
}
