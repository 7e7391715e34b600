// handleSignals: flush on SIGTERM and SIGINT, then leave the process to the application.

const SIGNALS = ['SIGTERM', 'SIGINT'] as const;
type HandledSignal = (typeof SIGNALS)[number];
/** 128 + the signal's number: what a shell reports for a process the signal ended. */
const EXIT_CODES: Record<HandledSignal, number> = { SIGTERM: 143, SIGINT: 130 };

interface SignalProcess {
  on(signal: HandledSignal, listener: () => void): unknown;
  removeListener(signal: HandledSignal, listener: () => void): unknown;
  listenerCount(signal: HandledSignal): number;
  exit(code: number): never;
}

/**
 * Listens for SIGTERM and SIGINT. On the first, runs `shutdown` (which stops the listening), then
 * exits with 128 + the signal's number unless the application listens for that signal itself, in
 * which case its own listener decides (Node called it with ours). A second signal while shutting
 * down exits at once when no application listener is there. Returns the function that stops listening.
 */
export function onTerminationSignals(
  shutdown: () => Promise<unknown>,
  proc: SignalProcess = process as unknown as SignalProcess,
): () => void {
  let shuttingDown = false;
  const listeners = new Map<HandledSignal, () => void>();
  const others = (signal: HandledSignal) => proc.listenerCount(signal) - (listeners.has(signal) ? 1 : 0);
  const stop = () => {
    for (const [signal, listener] of listeners) proc.removeListener(signal, listener);
    listeners.clear();
  };
  for (const signal of SIGNALS) {
    const listener = () => {
      if (shuttingDown) {
        if (others(signal) === 0) proc.exit(EXIT_CODES[signal]);
        return;
      }
      shuttingDown = true;
      const alone = others(signal) === 0;
      void shutdown()
        .catch(() => undefined)
        .finally(() => {
          stop();
          if (alone) proc.exit(EXIT_CODES[signal]);
        });
    };
    listeners.set(signal, listener);
    proc.on(signal, listener);
  }
  return stop;
}
