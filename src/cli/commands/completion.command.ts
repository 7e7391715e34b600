import { Argument, CommandUnknownOpts } from '@commander-js/extra-typings';
import { defineJsonCommand } from '@app/cli/command';
import { completionScript, SHELLS } from '@app/cli/completion';
import type { CliRuntime } from '@app/cli/runtime';

function root(command: CommandUnknownOpts): CommandUnknownOpts {
  return command.parent ? root(command.parent) : command;
}

export function completionCommand(rt: CliRuntime) {
  return defineJsonCommand(
    'completion',
    'Print a script that completes tally commands, options and values in the shell.',
    [
      'tally completion bash > ~/.local/share/bash-completion/completions/tally',
      'tally completion zsh > ~/.zfunc/_tally   # a folder in $fpath, before compinit',
      'source <(tally completion bash)          # or this line in ~/.bashrc',
    ],
    '{ "shell", "script" }',
  )
    .addArgument(new Argument('<shell>', 'bash or zsh').choices(SHELLS))
    .action((shell, options, command) => {
      const script = completionScript(shell, root(command));
      if (options.json) rt.print({ json: { shell, script }, text: '' }, true);
      else rt.io.stdout(script);
    });
}
