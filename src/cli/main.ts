#!/usr/bin/env node
import { CommanderError } from '@commander-js/extra-typings';
import type { AppConfig } from '@app/config/config';
import { describeFailure, ExitCode, failureDocument } from './exit-codes';
import { buildProgram, expandHelp } from './program';
import { CliIo, CliRuntime } from './runtime';

export type { CliIo } from './runtime';

const processIo: CliIo = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  prompt: async (question) => {
    if (!process.stdin.isTTY || !process.stderr.isTTY) return null;
    const { createInterface } = await import('node:readline/promises');
    const rl = createInterface({ input: process.stdin, output: process.stderr });
    try {
      return await rl.question(question);
    } finally {
      rl.close();
    }
  },
};

// commander reports the end of a command line it handled itself (help, a usage error) by
// throwing; the help it printed on request is a success, the rest are usage errors.
function commanderExit(err: CommanderError): ExitCode {
  if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') return ExitCode.Ok;
  if (err.code === 'commander.help' && err.exitCode === 0) return ExitCode.Ok;
  return ExitCode.Usage;
}

/**
 * Runs one admin command and returns its exit code (see ExitCode). With --json, stdout gets
 * exactly one JSON document and nothing else, failures included (`{ "error": { "code",
 * "message" } }`); the failure's line also goes to stderr. Without it, a usage error is one line
 * on stderr, except that a command line naming no command (or only a group) prints that level's
 * help on stderr.
 */
export async function runCli(argv: string[], io: CliIo = processIo, config?: AppConfig): Promise<number> {
  const json = argv.includes('--json');
  const runtime = new CliRuntime(io, config, json);
  try {
    const program = buildProgram(runtime);
    await program.parseAsync(expandHelp(program, argv), { from: 'user' });
    return runtime.exitCode ?? ExitCode.Ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      const code = commanderExit(err);
      // A line naming no command (or only a group) printed its help on stderr: say so in JSON.
      if (json && code !== ExitCode.Ok && err.code === 'commander.help') {
        io.stdout(failureDocument({ error: 'usage', message: "name a command (see 'tally --help')" }));
      }
      return code;
    }
    const failure = describeFailure(err);
    io.stderr(`tally: ${failure.message}\n`);
    if (json) io.stdout(failureDocument(failure));
    return failure.code;
  } finally {
    await runtime.close();
  }
}

if (require.main === module) {
  void runCli(process.argv.slice(2)).then((code) => process.exit(code));
}
