// Realistic ingest traffic: events of about 230 bytes with a 5-key payload, in the shapes a mobile
// SDK sends. Every generator is seeded, so that two runs send the same mix.

export const EVENT_NAMES = [
  'App.opened',
  'Screen.viewed',
  'Button.tapped',
  'Session.started',
  'Search.performed',
  'Product.viewed',
  'Cart.itemAdded',
  'Checkout.started',
  'Checkout.completed',
  'Purchase.refunded',
  'Push.received',
  'Push.opened',
  'Settings.changed',
  'Login.succeeded',
  'Signup.completed',
  'Share.sent',
  'Video.played',
  'Error.shown',
  'Review.prompted',
  'App.backgrounded',
];

const SCREENS = ['home', 'cart', 'search', 'product', 'profile', 'settings', 'checkout', 'feed'];
const PLATFORMS = ['ios', 'android', 'web'];
const LOCALES = ['en-US', 'de-DE', 'fr-FR', 'es-ES', 'pt-BR', 'ja-JP'];
const ZONES = ['Europe/Berlin', 'America/New_York', 'Asia/Tokyo', 'Europe/Paris', '+02:00'];
const DEVICES = ['iPhone15,2', 'Pixel 8', 'SM-S918B', 'iPad13,4'];

/** A small deterministic PRNG (mulberry32), so runs are comparable. */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pick = (r, list) => list[Math.floor(r() * list.length)];
const hex = (r, n) => {
  let s = '';
  while (s.length < n) s += Math.floor(r() * 0xffffffff).toString(16);
  return s.slice(0, n);
};

/** One valid event. `eventId` is supplied by the caller so that it can be made unique. */
export function makeEvent(r, eventId, now = Date.now()) {
  const platform = pick(r, PLATFORMS);
  const event = {
    eventName: pick(r, EVENT_NAMES),
    anonymousUserId: `u_${hex(r, 10)}`,
    sessionId: `s_${hex(r, 8)}`,
    eventTime: now - Math.floor(r() * 60_000),
    eventId,
    platform,
    payload: {
      screen: pick(r, SCREENS),
      step: Math.floor(r() * 12),
      price: Math.round(r() * 20000) / 100,
      plan: pick(r, ['free', 'pro', 'team']),
      trial: r() < 0.2,
    },
  };
  // Context fields come and go, as they do with real SDKs.
  if (r() < 0.3) event.appVersion = `3.${Math.floor(r() * 9)}.${Math.floor(r() * 20)}`;
  if (r() < 0.2) event.locale = pick(r, LOCALES);
  if (r() < 0.15) event.timezone = pick(r, ZONES);
  if (r() < 0.2) event.floatValue = Math.round(r() * 10000) / 100;
  if (platform !== 'web' && r() < 0.15) event.deviceModel = pick(r, DEVICES);
  return event;
}

/** Ways an event breaks the schema; each is a permanent per-event rejection, never a 4xx for the batch. */
const BREAKERS = [
  (e) => delete e.eventName,
  (e) => (e.eventName = ''),
  (e) => (e.buildNumber = 1234),
  (e) => (e.eventTime = -5),
  (e) => (e.eventTime = 'yesterday'),
  (e) => (e.payload.nested = { a: 1 }),
  (e) => (e.payload.list = [1, 2]),
  (e) => (e.payload.note = 'x'.repeat(1100)),
  (e) => (e.isTestMode = 'yes'),
  (e) => (e.floatValue = 'NaN'),
  (e) => (e.anonymousUserId = 42),
  (e) => (e.eventName = 'Bad\u0000name'),
];

/** An event that must be rejected; `kind` cycles through the breakers. */
export function makeInvalidEvent(r, eventId, kind, now = Date.now()) {
  const event = makeEvent(r, eventId, now);
  BREAKERS[kind % BREAKERS.length](event);
  return event;
}

export const INVALID_KINDS = BREAKERS.length;

const ID_SLOT = '\u0001ID\u0001';

/**
 * A batch body split around its eventIds, so that a unique body costs one string join instead of
 * a JSON.stringify. `render(tag)` gives a body whose eventIds are `<tag>.<index>`.
 */
export function batchTemplate(seed, size, now = Date.now()) {
  const r = rng(seed);
  const events = [];
  for (let i = 0; i < size; i++) events.push(makeEvent(r, ID_SLOT, now));
  const parts = JSON.stringify({ events }).split(JSON.stringify(ID_SLOT));
  return {
    size,
    render(tag) {
      let out = parts[0];
      for (let i = 1; i < parts.length; i++) out += `"${tag}.${i - 1}"` + parts[i];
      return out;
    },
  };
}
