import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { mapPostHogBody, postHogKeyOf } from './posthog.mapping';

/** What the SDK sent, captured by test/fixtures/sdk/capture.mjs. */
const captured = JSON.parse(
  readFileSync(join(__dirname, '../../test/fixtures/sdk/posthog-node.json'), 'utf8'),
) as { body: unknown }[];

const pseudonym = (id: string) => `hmac:${id.length}`;

describe('PostHog mapping, from a batch captured from posthog-node', () => {
  const body = captured[0].body as unknown as Record<string, unknown>;
  const mapped = mapPostHogBody(body, pseudonym)!;
  const batch = body.batch as Record<string, unknown>[];

  it('maps events, and acknowledges $identify, $create_alias and $groupidentify', () => {
    expect(mapped.events.map((e) => e.eventName)).toEqual(['Checkout.completed', '$pageview', '$screen']);
    expect(mapped.acknowledged).toBe(3);
    expect(mapped.sentAt).toBe(Date.parse(body.sent_at as string));
    expect(postHogKeyOf(body)).toBe('tly_test_capture');
  });

  it('maps the $-properties onto Tally fields and the others onto the payload', () => {
    expect(mapped.events[0]).toEqual({
      eventName: 'Checkout.completed',
      eventId: batch[0].uuid,
      anonymousUserId: 'hmac:10',
      eventTime: Date.parse(batch[0].timestamp as string),
      sessionId: 'sess-1',
      platform: 'Android',
      osVersion: '14',
      appVersion: '2.4.1',
      buildNumber: '311',
      deviceModel: 'Pixel 8',
      locale: 'en-US',
      timezone: 'Europe/Paris',
      payload: { plan: 'pro', value: 12.5, 'cart.total': 3 },
      floatValue: 12.5,
    });
    expect(mapped.warnings).toEqual([
      expect.objectContaining({ index: 0, field: 'properties.tags', code: 'ignored_field' }),
    ]);
    expect(mapped.events[1]).toEqual(expect.not.objectContaining({ payload: expect.anything() }));
  });

  it('never carries $set, the raw distinct id or the key', () => {
    const text = JSON.stringify(mapped.events);
    expect(text).not.toContain('account-42');
    expect(text).not.toContain('ann@example.com');
    expect(text).not.toContain('tly_test_capture');
  });

  it('takes one event or an array (posthog-js), with the key and distinct id in the properties', () => {
    const js = [
      { event: 'Click', uuid: 'u', properties: { token: 'k1', distinct_id: 'd', $lib: 'web', label: 'x' } },
    ];
    expect(postHogKeyOf(js)).toBe('k1');
    expect(mapPostHogBody(js, pseudonym)!.events).toEqual([
      { eventName: 'Click', eventId: 'u', anonymousUserId: 'hmac:1', payload: { label: 'x' } },
    ]);
    expect(mapPostHogBody({ api_key: 'k', event: 'One', distinct_id: 7 }, pseudonym)!.events).toEqual([
      { eventName: 'One', anonymousUserId: 'hmac:1' },
    ]);
    expect(mapPostHogBody({ api_key: 'k' }, pseudonym)).toBeNull();
    expect(mapPostHogBody({ batch: ['x'] }, pseudonym)!.rejections).toEqual([
      expect.objectContaining({ index: 0, code: 'invalid_type' }),
    ]);
  });
});
