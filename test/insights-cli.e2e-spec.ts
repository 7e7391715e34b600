import { runTestCli, expectFailureStdout } from './support/run-cli';
import { useTestApp } from './support/test-app';

describe('tally apps set-dimensions', () => {
  // The CLI runs against the same database; the server is only there to have it migrated.
  useTestApp({ ROLLUPS_ENABLED: 'false' });

  it('declares, lists, audits and clears the payload dimensions of an app', async () => {
    const created = await runTestCli('apps', 'create', '--name', 'Dimensions', '--json');
    expect(created.code).toBe(0);
    const appId = created.json.id as string;
    expect(created.json.dimensions).toEqual([]);

    const set = await runTestCli('apps', 'set-dimensions', appId, 'plan', 'country', '--json');
    expect(set.code).toBe(0);
    expect(set.json).toEqual({
      appId,
      dimensions: ['plan', 'country'],
      previousDimensions: [],
      recomputeFrom: expect.stringMatching(/^\d{4}-\d{2}-\d{2}$/),
    });
    const list = await runTestCli('apps', 'list', '--json');
    expect(list.json.find((a: { id: string }) => a.id === appId)).toMatchObject({
      dimensions: ['plan', 'country'],
    });
    const text = await runTestCli('apps', 'list');
    expect(text.stdout).toContain('plan,country');

    const audit = await runTestCli('audit', 'list', '--app', appId, '--json');
    expect(audit.json).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          action: 'app.dimensions_changed',
          details: expect.objectContaining({ from: [], to: ['plan', 'country'] }),
        }),
      ]),
    );

    const cleared = await runTestCli('apps', 'set-dimensions', appId, '--json');
    expect(cleared.json).toMatchObject({ dimensions: [], previousDimensions: ['plan', 'country'] });
  });

  it('refuses more than 10 keys, a bad key and an unknown app', async () => {
    const created = await runTestCli('apps', 'create', '--name', 'Dimensions 2', '--json');
    const appId = created.json.id as string;
    const keys = Array.from({ length: 11 }, (_, i) => `k${i}`);
    const tooMany = await runTestCli('apps', 'set-dimensions', appId, ...keys, '--json');
    expect(tooMany.code).toBe(2);
    expectFailureStdout(tooMany, 'invalid_body');
    const bad = await runTestCli('apps', 'set-dimensions', appId, 'a\u0001b', '--json');
    expect(bad.code).toBe(2);
    expectFailureStdout(bad, 'invalid_body');
    const unknown = await runTestCli(
      'apps',
      'set-dimensions',
      '0b6f1c2e-8d4a-4c7e-9a51-2f3d4e5a6b7c',
      'plan',
      '--json',
    );
    expect(unknown.code).not.toBe(0);
    expectFailureStdout(unknown, 'not_found');
  });
});
