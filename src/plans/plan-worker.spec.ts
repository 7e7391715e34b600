import { compilerStop } from './plan-worker';

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
