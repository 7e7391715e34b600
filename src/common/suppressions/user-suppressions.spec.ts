import { suppressionHash, UserSuppressions } from './user-suppressions';

const KEY = Buffer.alloc(32, 1);
const hex = (appId: string, userId: string) => suppressionHash(KEY, appId, userId).toString('hex');

describe('UserSuppressions', () => {
  it('gives no matcher for an app without suppressions, or before the key is set', () => {
    const s = new UserSuppressions();
    s.replaceApp('a', [hex('a', 'u1')]);
    expect(s.matcher('a')).toBeNull();
    s.setKey(KEY);
    expect(s.matcher('b')).toBeNull();
    expect(s.matcher('a')).not.toBeNull();
  });

  it('matches the listed users of that app only', () => {
    const s = new UserSuppressions();
    s.setKey(KEY);
    s.replaceAll(new Map([['a', [hex('a', 'u1')]]]));
    const match = s.matcher('a')!;
    expect(match('u1')).toBe(true);
    expect(match('u1')).toBe(true);
    expect(match('u2')).toBe(false);
    // The same id hashes differently in another app.
    expect(hex('a', 'u1')).not.toBe(hex('b', 'u1'));
  });

  it('a change of the list reaches the next matcher, remembered answers included', () => {
    const s = new UserSuppressions();
    s.setKey(KEY);
    s.replaceApp('a', [hex('a', 'u1')]);
    expect(s.matcher('a')!('u2')).toBe(false);
    s.replaceApp('a', [hex('a', 'u1'), hex('a', 'u2')]);
    expect(s.matcher('a')!('u2')).toBe(true);
    s.replaceApp('a', []);
    expect(s.matcher('a')).toBeNull();
  });
});
