import { Command, CommandUnknownOpts } from '@commander-js/extra-typings';
import { appsCreateCommand } from './commands/apps-create.command';
import { appsListCommand } from './commands/apps-list.command';
import { appsDeleteCommand } from './commands/apps-delete.command';
import { appsRenameCommand } from './commands/apps-rename.command';
import { appsSetTimezoneCommand } from './commands/apps-set-timezone.command';
import { appsSetDimensionsCommand } from './commands/apps-set-dimensions.command';
import { auditListCommand } from './commands/audit-list.command';
import { completionCommand } from './commands/completion.command';
import { keysCreateApiCommand } from './commands/keys-create-api.command';
import { keysCreateIngestCommand } from './commands/keys-create-ingest.command';
import { keysListCommand } from './commands/keys-list.command';
import { keysRevokeCommand } from './commands/keys-revoke.command';
import { keysRotateCommand } from './commands/keys-rotate.command';
import { migrateCommand } from './commands/migrate.command';
import { exportCommand } from './commands/export.command';
import { rollupsComputeCommand } from './commands/rollups-compute.command';
import { seedCommand } from './commands/seed.command';
import { statusCommand } from './commands/status.command';
import { suppressionsListCommand } from './commands/suppressions-list.command';
import { suppressionsRemoveCommand } from './commands/suppressions-remove.command';
import { usersDeleteCommand } from './commands/users-delete.command';
import { plansCheckCommand, plansGetCommand, plansSetCommand } from './commands/plans.command';
import { quarantineListCommand, quarantineReplayCommand } from './commands/quarantine.command';
import { backupCommand } from './commands/backup.command';
import { restoreCommand } from './commands/restore.command';
import { failureDocument, UsageError } from './exit-codes';
import type { CliIo, CliRuntime } from './runtime';

const FOOTER = `
Every command takes --json and then prints exactly one JSON document on stdout, a failure
included: { "error": { "code", "message" } }.

Exit codes:
  0  done
  1  failed: the database is unreachable, an environment variable is wrong, ...
  2  usage error: no or unknown command, unknown option, missing or malformed value; no database
  3  refused: the id names no app or key, a key that is revoked or expired, or a stale --if-match
  4  rejected: tally plans check found events that ingest would reject

The CLI uses DATABASE_URL, or else the embedded PostgreSQL in EMBEDDED_PG_DIR (default: .data in
the folder Tally is installed in, whatever the current directory), which it shares with a server
running there. Only the service creates that database: without one, a command exits 2. Run 'tally help <command>' for a command's options.
`;

function group(name: string, description: string, commands: CommandUnknownOpts[]): CommandUnknownOpts {
  const command = new Command(name).description(description);
  for (const sub of commands) command.addCommand(sub);
  return command;
}

/** The whole command tree. Building it loads no database code. */
export function buildProgram(rt: CliRuntime): CommandUnknownOpts {
  const program = new Command('tally')
    .description(
      'Administer Tally: apps, keys, rollups, the audit log, the database schema, backups and restores.',
    )
    .usage('<command> [options]')
    .helpCommand('help [command...]', 'Show the help of a command.')
    .addHelpText('after', FOOTER);
  program.addCommand(
    group('apps', 'Create, list, rename and delete apps, set their time zone and breakdown dimensions.', [
      appsCreateCommand(rt),
      appsListCommand(rt),
      appsRenameCommand(rt),
      appsSetTimezoneCommand(rt),
      appsSetDimensionsCommand(rt),
      appsDeleteCommand(rt),
    ]),
  );
  program.addCommand(
    group('keys', 'Issue, list, revoke and rotate ingest and API keys.', [
      keysCreateIngestCommand(rt),
      keysCreateApiCommand(rt),
      keysListCommand(rt),
      keysRevokeCommand(rt),
      keysRotateCommand(rt),
    ]),
  );
  program.addCommand(group('rollups', 'Recompute the daily rollups.', [rollupsComputeCommand(rt)]));
  program.addCommand(
    group('plans', 'Read, replace and check tracking plans.', [
      plansGetCommand(rt),
      plansSetCommand(rt),
      plansCheckCommand(rt),
    ]),
  );
  program.addCommand(
    group('quarantine', 'List and replay the events a tracking plan rejected.', [
      quarantineListCommand(rt),
      quarantineReplayCommand(rt),
    ]),
  );
  program.addCommand(group('audit', 'Read the append-only log of admin actions.', [auditListCommand(rt)]));
  program.addCommand(group('users', "Erase users' data.", [usersDeleteCommand(rt)]));
  program.addCommand(
    group('suppressions', 'List and lift the suppressions of erased users.', [
      suppressionsListCommand(rt),
      suppressionsRemoveCommand(rt),
    ]),
  );
  program.addCommand(exportCommand(rt));
  program.addCommand(seedCommand(rt));
  program.addCommand(migrateCommand(rt));
  program.addCommand(statusCommand(rt));
  program.addCommand(backupCommand(rt));
  program.addCommand(restoreCommand(rt));
  program.addCommand(completionCommand(rt));
  configure(program, rt.io, rt.json);
  return program;
}

function commandPath(command: CommandUnknownOpts): string {
  return command.parent ? `${commandPath(command.parent)} ${command.name()}` : command.name();
}

/**
 * commander suggests by spelling distance, so `keys create` got "did you mean rotate?". A word that
 * begins the names of subcommands suggests those instead: create-ingest or create-api.
 */
function suggestByPrefix(text: string, command: CommandUnknownOpts): string {
  const word = /unknown command '([^']+)'/.exec(text)?.[1];
  const names = word ? command.commands.map((c) => c.name()).filter((n) => n.startsWith(`${word}-`)) : [];
  if (names.length === 0) return text;
  return `${text.replace(/\s*\n\s*\(Did you mean [^)]*\)/, '')}\n(Did you mean ${names.join(' or ')}?)`;
}

// commander's error lines ("error: unknown option '--x'\n(Did you mean --y?)") as one line.
function oneLine(text: string, command: CommandUnknownOpts): string {
  const message = suggestByPrefix(text, command)
    .replace(/^error: /, '')
    .replace(/\s*\n\s*\(Did you mean/, ' (did you mean')
    .replace(/\s+/g, ' ')
    .trim();
  return `tally: ${message} (see '${commandPath(command)} --help')\n`;
}

// Settings that commander does not pass on through addCommand, applied to every command. With
// --json, a usage error that commander finds is also the JSON document on stdout.
function configure(command: CommandUnknownOpts, io: CliIo, json: boolean): void {
  command
    .exitOverride()
    .configureOutput({
      writeOut: io.stdout,
      writeErr: io.stderr,
      outputError: (text, write) => {
        const line = oneLine(text, command);
        write(line);
        if (json)
          io.stdout(failureDocument({ error: 'usage', message: line.replace(/^tally: /, '').trim() }));
      },
    })
    .showSuggestionAfterError(true)
    .helpOption('-h, --help', 'show this help');
  if (command.parent) command.helpCommand(false);
  for (const sub of command.commands) configure(sub, io, json);
}

/**
 * `tally help keys rotate` is `tally keys rotate --help`. commander's own help command only
 * looks one word deep, so the words are resolved here, and an unknown one is a usage error.
 */
export function expandHelp(program: CommandUnknownOpts, argv: string[]): string[] {
  if (argv[0] !== 'help') return argv;
  const words = argv.slice(1);
  let command = program;
  for (const word of words) {
    const sub = command.commands.find((c) => c.name() === word);
    if (!sub) {
      const where = command === program ? '' : ` of '${commandPath(command)}'`;
      throw new UsageError(`unknown command '${word}'${where} (see 'tally --help')`);
    }
    command = sub;
  }
  return [...words, '--help'];
}
