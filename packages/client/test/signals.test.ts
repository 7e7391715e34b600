// handleSignals in a real process: SIGTERM and SIGINT, with and without a listener of the application.
import { execFile } from 'node:child_process';
import { join } from 'node:path';

const APP = join(__dirname, 'signal-app.ts');

function run(signal: string, withListener: 'yes' | 'no'): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, ['--import', 'tsx', APP, signal, withListener], {
      timeout: 30_000,
    });
    let out = '';
    child.stdout!.on('data', (c) => (out += c));
    child.once('exit', (code) => resolve({ code, out }));
  });
}

describe('handleSignals', () => {
  it.each([
    ['SIGTERM', 143],
    ['SIGINT', 130],
  ])('on %s with no other listener: flushes, then exits with %i', async (signal, code) => {
    const { code: exit, out } = await run(signal, 'no');
    expect({ exit, out }).toEqual({ exit: code, out: `exit ${code} sent 1\n` });
  });

  it.each(['SIGTERM', 'SIGINT'])(
    'on %s with a listener of the application: that listener runs once and decides the exit',
    async (signal) => {
      const { code, out } = await run(signal, 'yes');
      expect({ code, out }).toEqual({ code: 0, out: 'app listener 1\nexit 0 sent 1\n' });
    },
  );
});
