import { Command } from '@commander-js/extra-typings';

/**
 * A command with its description and examples, both part of its own --help. Options, arguments
 * and the action are added by the command's file.
 */
export function defineCommand(name: string, description: string, examples: string[]) {
  const title = examples.length > 1 ? 'Examples' : 'Example';
  return new Command(name)
    .description(description)
    .addHelpText('after', `\n${title}:\n${examples.map((e) => `  $ ${e}`).join('\n')}\n`);
}

/** A command that takes --json, with the shape of its JSON document in its --help. */
export function defineJsonCommand(name: string, description: string, examples: string[], json: string) {
  return defineCommand(name, description, examples)
    .option('--json', 'print one JSON document (shape below) instead of text')
    .addHelpText('after', `\nWith --json:\n  ${json}\n`);
}
