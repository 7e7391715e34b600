import { leadingMember } from './sdk-key.guard';

const lead = (text: string, member = 'api_key') => leadingMember(Buffer.from(text), member);

describe('leadingMember', () => {
  it("reads the key when it is the body's first member, whitespace and a byte order mark allowed", () => {
    expect(lead('{"api_key":"tly_live_abc","batch":[]}')).toBe('tly_live_abc');
    expect(lead('\ufeff {\n "api_key" : "tly_live_x" ,"batch":[]}')).toBe('tly_live_x');
    expect(lead('{"writeKey":"tly_live_w","batch":[]}', 'writeKey')).toBe('tly_live_w');
  });

  it('leaves every other body to the parser: a later member, an escape, an empty value, an array, another name', () => {
    expect(lead('{"batch":[],"api_key":"tly_live_abc"}')).toBeNull();
    expect(lead('{"api_key":"a\\"b"}')).toBeNull();
    expect(lead('{"api_key":""}')).toBeNull();
    expect(lead('[{"api_key":"k"}]')).toBeNull();
    expect(lead('{"api_keys":"k"}')).toBeNull();
    expect(lead('{"token":"k"}')).toBeNull();
  });
});
