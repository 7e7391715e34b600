#!/usr/bin/env node
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import type { INestApplicationContext } from '@nestjs/common';
import { AppError } from '@app/common/app-error';
import { ConfigError, loadConfigFromProcess } from '@app/config/config';
import type { AppConfig } from '@app/config/config';
import { prepareDatabase } from '@app/database/prepare';
import { CliModule } from './cli.module';
import { findCommand, UsageError, usage } from './commands';

export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

const processIo: CliIo = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
};

/**
 * Runs one admin command and returns the exit code: 0 on success, 2 for bad arguments
 * (one line on stderr), 1 for any other failure. With --json, stdout gets exactly one JSON
 * document and nothing else.
 */
export async function runCli(
  argv: string[],
  io: CliIo = processIo,
  configOverride?: AppConfig,
): Promise<number> {
  if (argv.length === 0 || argv.includes('--help') || argv.includes('-h')) {
    io.stdout(usage() + '\n');
    return argv.length === 0 ? 2 : 0;
  }
  let release: (() => Promise<void>) | undefined;
  let ctx: INestApplicationContext | undefined;
  try {
    const { command, rest } = findCommand(argv);
    const options = command.parse(rest);
    const json = rest.includes('--json');
    const base = configOverride ?? loadConfigFromProcess();
    const config: AppConfig = { ...base, rollupsEnabled: false };
    const database = await prepareDatabase(config, {
      migrate: command.path[0] === 'migrate' ? true : undefined,
    });
    release = database.release;
    if (command.needsServices) {
      ctx = await NestFactory.createApplicationContext(CliModule.forRoot(database.config), {
        logger: false,
        abortOnError: false,
      });
    }
    const result = await command.run(ctx ?? null, { ...options, applied: database.migrationsApplied });
    io.stdout((json ? JSON.stringify(result.json, null, 2) : result.text) + '\n');
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr(`tally: ${err.message}\n`);
      return 2;
    }
    if (err instanceof AppError && err.status < 500) {
      io.stderr(`tally: ${err.detail}\n`);
      return 2;
    }
    if (err instanceof ConfigError) {
      io.stderr(`tally: ${err.message}\n`);
      return 1;
    }
    io.stderr(`tally: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  } finally {
    await ctx?.close().catch(() => undefined);
    await release?.().catch(() => undefined);
  }
}

if (require.main === module) {
  void runCli(process.argv.slice(2)).then((code) => process.exit(code));
}
