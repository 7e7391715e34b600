import type { ChildProcess } from 'node:child_process';

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
export function freePort(): Promise<number>;
/** A pause of `ms`. For pacing (a request rate, a randomised kill time), never in place of a condition. */
export function sleep(ms: number): Promise<void>;
/** Resolves with the first truthy value of `check`, or rejects naming `what` after `timeoutMs`. */
export function waitFor<T>(
  check: () => T | Promise<T>,
  options?: { timeoutMs?: number; intervalMs?: number; what?: string },
): Promise<NonNullable<T>>;
/** The middle value (the upper one of an even count). */
export function median(values: number[]): number;
/** Everything the child printed once its output matches `pattern`. */
export function waitForOutput(
  child: ChildProcess,
  pattern: RegExp,
  options?: { timeoutMs?: number; streams?: ('stdout' | 'stderr')[] },
): Promise<string>;
export interface NodeProcess {
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): string;
  kill(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}
/** `node <script>` with `env`, once `ready` (default: "Tally listening") is in its output. */
export function startNodeProcess(
  script: string,
  options?: {
    env?: Record<string, string>;
    args?: string[];
    cwd?: string;
    ready?: RegExp | null;
    timeoutMs?: number;
  },
): Promise<NodeProcess>;
/** The value of one sample line of a Prometheus exposition, or undefined. */
export function sample(text: string, name: string, labels?: Record<string, string>): number | undefined;
