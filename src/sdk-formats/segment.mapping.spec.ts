import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { join } from 'node:path';
import { mapSegmentBody } from './segment.mapping';
import { utcMillisOf } from './sdk-mapping';

/** What the SDK sent, captured by test/fixtures/sdk/capture.mjs. */
const captured = JSON.parse(
  readFileSync(join(__dirname, '../../test/fixtures/sdk/segment-node.json'), 'utf8'),
) as { body: unknown }[];

const pseudonym = (id: string) => `hmac:${id.length}`;

describe('Segment mapping, from a batch captured from @segment/analytics-node', () => {
  const body = captured[0].body as unknown as Record<string, unknown>;
  const mapped = mapSegmentBody('batch', body, pseudonym)!;

  it('maps track, page and screen, and acknowledges identify, group and alias', () => {
    expect(mapped.events.map((e) => e.eventName)).toEqual([
      'Checkout.completed',
      'Page.viewed',
      'Screen.viewed',
    ]);
    expect(mapped.messageIndexes).toEqual([0, 1, 2]);
    expect(mapped.acknowledged).toBe(3);
    expect(mapped.rejections).toEqual([]);
    expect(mapped.sentAt).toBe(Date.parse(body.sentAt as string));
  });

  it('maps the context, the properties (flattened) and the value onto Tally fields', () => {
    const batch = body.batch as Record<string, unknown>[];
    expect(mapped.events[0]).toEqual({
      eventName: 'Checkout.completed',
      eventId: batch[0].messageId,
      anonymousUserId: 'hmac:10',
      eventTime: Date.parse(batch[0].timestamp as string),
      platform: 'iOS',
      osVersion: '17.2',
      appVersion: '2.4.1',
      buildNumber: '311',
      deviceModel: 'iPhone15,2',
      locale: 'de-DE',
      timezone: 'Europe/Berlin',
      payload: { plan: 'pro', revenue: 12.5, 'cart.total': 3, 'cart.currency': 'EUR' },
      floatValue: 12.5,
    });
    expect(mapped.warnings).toEqual([
      {
        index: 0,
        field: 'properties.tags',
        code: 'ignored_field',
        message: expect.stringContaining('array'),
      },
    ]);
  });

  it('keeps the anonymous id when there is no account id, and the page name in the payload', () => {
    expect(mapped.events[1]).toMatchObject({
      anonymousUserId: 'anon-1',
      payload: { path: '/pricing', value: 3, name: 'Pricing' },
      floatValue: 3,
    });
    expect(mapped.events[2]).toMatchObject({
      anonymousUserId: 'hmac:10',
      payload: { tab: 'feed', name: 'Home' },
    });
  });

  it('never carries traits, the raw account id or the library context', () => {
    const text = JSON.stringify(mapped.events);
    expect(text).not.toContain('account-42');
    expect(text).not.toContain('ann@example.com');
    expect(text).not.toContain('analytics-node');
  });

  it('takes single messages by endpoint, and rejects unknown types and non-objects', () => {
    const one = mapSegmentBody('t', { event: 'A', anonymousId: 'x', messageId: 'm' }, pseudonym)!;
    expect(one.events).toEqual([{ eventName: 'A', eventId: 'm', anonymousUserId: 'x' }]);
    expect(mapSegmentBody('i', { userId: 'u' }, pseudonym)!.acknowledged).toBe(1);
    const bad = mapSegmentBody('batch', { batch: [7, { type: 'x' }] }, pseudonym)!;
    expect(bad.rejections.map((r) => [r.index, r.field, r.code])).toEqual([
      [0, 'message', 'invalid_type'],
      [1, 'type', 'invalid_value'],
    ]);
    expect(mapSegmentBody('batch', { events: [] }, pseudonym)).toBeNull();
  });

  it('warns about an unreadable timestamp and uses the batch context under the message’s', () => {
    const out = mapSegmentBody(
      'batch',
      {
        context: { locale: 'fr-FR', os: { name: 'Android' } },
        batch: [{ type: 'track', event: 'A', timestamp: 'soon', context: { locale: 'en-GB' } }],
      },
      pseudonym,
    )!;
    expect(out.events[0]).toEqual({ eventName: 'A', platform: 'Android', locale: 'en-GB' });
    expect(out.warnings).toEqual([
      expect.objectContaining({ index: 0, field: 'timestamp', code: 'invalid_format' }),
    ]);
  });
});

describe('the ISO times SDKs send', () => {
  it('reads YYYY-MM-DDTHH:MM:SS.sssZ as Date.parse does, and leaves any other form to it', () => {
    for (const s of ['2026-11-27T05:20:35.822Z', '2024-02-29T23:59:59.999Z', '1970-01-01T00:00:00.000Z']) {
      expect(utcMillisOf(s)).toBe(Date.parse(s));
    }
    for (const s of [
      '2026-02-29T00:00:00.000Z',
      '2026-13-01T00:00:00.000Z',
      '2026-11-27T24:00:00.000Z',
      '2026-11-27 05:20:35.822Z',
      '2026-11-27T05:20:35Z',
      '2026-11-27T05:2x:35.822Z',
    ]) {
      expect(utcMillisOf(s)).toBeNull();
    }
  });

  it('gives any such time Date.parse gives, from year 100 to 9999', () => {
    fc.assert(
      fc.property(
        fc.date({
          min: new Date('0100-01-01T00:00:00.000Z'),
          max: new Date('9999-12-31T23:59:59.999Z'),
          noInvalidDate: true,
        }),
        (d) => {
          const s = d.toISOString();
          expect(utcMillisOf(s)).toBe(Date.parse(s));
        },
      ),
      { numRuns: 2000 },
    );
    for (const s of ['1969-12-31T23:59:59.999Z', '2000-02-29T12:00:00.000Z', '2100-03-01T00:00:00.000Z']) {
      expect(utcMillisOf(s)).toBe(Date.parse(s));
    }
  });
});
