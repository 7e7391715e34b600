import { AppConfig, loadConfigFromProcess } from '@app/config/config';
import type { CliGroup, CliServices } from './services';

export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Asks the person at the terminal; absent, or resolving null, when there is no terminal. */
  prompt?: (question: string) => Promise<string | null>;
}

/** What a command prints: `json` with --json, `text` for a person otherwise. */
export interface CommandOutput {
  json: unknown;
  text: string;
}

// The database code, TypeORM and the services load only when a command first asks for them, and
// only after the command line has been parsed and checked.
function databaseCode(): typeof import('./services') {
  return require('./services') as typeof import('./services');
}

/** What the commands share: the output streams and the services, opened on first use. */
export class CliRuntime {
  private opened?: Promise<CliServices>;
  /** Set by a command that ran to the end but reports an outcome through its exit code. */
  exitCode?: number;

  constructor(
    readonly io: CliIo,
    private readonly configOverride?: AppConfig,
    /** --json was given: failures, usage errors included, are one JSON document on stdout too. */
    readonly json = false,
  ) {}

  /** The configuration, read from the environment when the first command needs it. */
  config(): AppConfig {
    return this.configOverride ?? loadConfigFromProcess();
  }

  /**
   * Attaches to the database (applying pending migrations unless MIGRATIONS_RUN=false) and builds
   * the command's context: apps, keys, the audit log and the groups named here. A command opens
   * its services once.
   */
  services(...groups: CliGroup[]): Promise<CliServices> {
    this.opened ??= databaseCode().openServices(this.config(), groups);
    return this.opened;
  }

  /** Applies the pending migrations; returns their names. */
  migrate(): Promise<string[]> {
    return databaseCode().migrate(this.config());
  }

  /** Prints the result of a command: one JSON document with --json, text otherwise. */
  print(output: CommandOutput, json: boolean | undefined): void {
    this.io.stdout((json ? JSON.stringify(output.json, null, 2) : output.text) + '\n');
  }

  /** Closes the database connections and leaves the embedded cluster, if they were opened. */
  async close(): Promise<void> {
    const services = await this.opened?.catch(() => undefined);
    await services?.close();
  }
}
