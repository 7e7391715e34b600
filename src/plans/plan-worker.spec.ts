import { AppError } from '@app/common/app-error';
import { compilerStop, processCpuMs, validatePlan } from './plan-worker';

describe('compilerStop: why the plan compiler ended without an answer', () => {
  it('tells a heap past its cap by V8 message, or by an exit with nothing written', () => {
    const oom = 'FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory';
    expect(compilerStop(null, 'SIGABRT', oom)).toBe('heap');
    expect(compilerStop(0, null, '')).toBe('heap');
  });

  it("takes V8's other fatal errors, which abort the process, for the plan's cost", () => {
    expect(compilerStop(null, 'SIGTRAP', '# Fatal JavaScript invalid size error 169220804')).toBe('aborted');
    expect(compilerStop(null, 'SIGSEGV', '')).toBe('aborted');
    expect(compilerStop(null, 'SIGKILL', '')).toBe('aborted');
  });

  it("takes an exit with an error of the script's own for a fault of the server's", () => {
    expect(compilerStop(1, null, "TypeError: Cannot read properties of undefined (reading 'x')")).toBe(
      'fault',
    );
  });
});

describe("the compile's deadline: the compiler's CPU time, not the clock", () => {
  const plan = { mode: 'enforce', events: { Signed_up: { payload: { type: 'object' } } } };

  /** Stops the compiler's process as soon as it starts, and lets it go on after `ms`. */
  const pausedFor = (ms: number) => (pid: number | undefined) => {
    if (pid === undefined) return;
    process.kill(pid, 'SIGSTOP');
    setTimeout(() => {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // Killed at the deadline already.
      }
    }, ms).unref();
  };

  it('reads a process CPU time from /proc, all of its threads', () => {
    const before = process.cpuUsage();
    const ms = processCpuMs(process.pid);
    expect(ms).not.toBeNull();
    // 10 ms ticks, against the microseconds of cpuUsage.
    expect(Math.abs(ms! - (before.user + before.system) / 1000)).toBeLessThan(100);
    expect(processCpuMs(2 ** 22 + 1)).toBeNull();
  });

  it('stores a plan whose compiler waited past the CPU deadline for a core, having spent little of it', async () => {
    // Held for twice the CPU deadline: a deadline on the clock would refuse the plan for its cost.
    const started = performance.now();
    const result = await validatePlan(plan, {
      deadline: { cpuMs: 1500, wallMs: 20_000 },
      started: pausedFor(3000),
    });
    expect(performance.now() - started).toBeGreaterThan(3000);
    expect(result).toEqual(expect.objectContaining({ ok: true }));
  });

  it('answers 503 with Retry-After when the clock runs out first, and no verdict on the plan', async () => {
    const refused = await validatePlan(plan, {
      deadline: { cpuMs: 1500, wallMs: 2000 },
      started: pausedFor(10_000),
    }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(AppError);
    expect(refused).toEqual(expect.objectContaining({ code: 'service_unavailable', status: 503 }));
    expect((refused as AppError).detail).toMatch(
      /^The server was too busy to compile the plan within 2 s \(it had used \d+ ms of CPU\); nothing was stored/,
    );
    expect((refused as AppError).options.headers).toEqual({ 'Retry-After': '10' });
  });

  it('refuses a plan for its cost once the compiler has spent the CPU deadline', async () => {
    // Hundreds of definitions: seconds of CPU, so the compile cannot end before the first look.
    const events = Object.fromEntries(
      Array.from({ length: 300 }, (_, i) => [
        `E${i}`,
        { payload: { type: 'object', properties: { p: { type: 'string', pattern: `^(a|b){1,9}x${i}$` } } } },
      ]),
    );
    const result = await validatePlan(
      { mode: 'enforce', events },
      { deadline: { cpuMs: 1, wallMs: 20_000 } },
    );
    expect(result).toEqual({
      ok: false,
      problems: [
        {
          path: '',
          message:
            'Compiling the plan would cost more than the server allows (more than 0.001 s of compiling).',
        },
      ],
    });
  });
});
