import type { CommandUnknownOpts } from '@commander-js/extra-typings';

export const SHELLS = ['bash', 'zsh'] as const;
export type Shell = (typeof SHELLS)[number];

interface Candidate {
  word: string;
  description: string;
}

/** What can follow the command words `path`: subcommands, arguments' values, options, and option values. */
interface Level {
  path: string;
  candidates: Candidate[];
  /** Option (long flag) → the values it takes. */
  values: Map<string, string[]>;
}

// Walks the program: each command path with what may be typed after it.
function levels(command: CommandUnknownOpts, path: string[] = []): Level[] {
  const candidates: Candidate[] = [];
  const values = new Map<string, string[]>();
  for (const sub of command.commands) candidates.push({ word: sub.name(), description: sub.description() });
  for (const arg of command.registeredArguments) {
    for (const choice of arg.argChoices ?? [])
      candidates.push({ word: choice, description: arg.description });
  }
  for (const option of command.options) {
    if (!option.long) continue;
    candidates.push({ word: option.long, description: option.description });
    if (option.argChoices) values.set(option.long, option.argChoices);
  }
  if (path.length === 0) candidates.push({ word: 'help', description: 'Show the help of a command.' });
  candidates.push({ word: '--help', description: 'show the help of this command' });
  const level = { path: path.join(' '), candidates, values };
  return [level, ...command.commands.flatMap((sub) => levels(sub, [...path, sub.name()]))];
}

/** `case` labels for the moves from one level to the next, e.g. `"keys/rotate"`. */
function moves(all: Level[]): string {
  return all
    .filter((l) => l.path !== '')
    .map((l) => {
      const words = l.path.split(' ');
      const parent = words.slice(0, -1).join(' ');
      return `"${parent}/${words[words.length - 1]}"`;
    })
    .join('|');
}

function bash(all: Level[], top: Candidate[]): string {
  const values = all.flatMap((l) =>
    [...l.values].map(([flag, choices]) => `    "${l.path}/${flag}") words="${choices.join(' ')}" ;;`),
  );
  const words = all.map(
    (l) => `        "${l.path}") words="${l.candidates.map((c) => c.word).join(' ')}" ;;`,
  );
  return `# Tally admin CLI completion for bash. Load it in ~/.bashrc with:
#   source <(tally completion bash)
_tally_complete() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}"
  local cmd="" word words="" i
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="\${COMP_WORDS[i]}"
    case "$cmd/$word" in
      ${moves(all)}) cmd="\${cmd:+$cmd }$word" ;;
      "/help") cmd="help"; break ;;
      *) break ;;
    esac
  done
  case "$cmd/$prev" in
${values.join('\n')}
    *)
      case "$cmd" in
        "help") words="${top.map((c) => c.word).join(' ')}" ;;
${words.join('\n')}
      esac
      ;;
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -F _tally_complete tally
`;
}

// _describe reads "word:description"; a colon inside the word is escaped.
function describeSpec(c: Candidate): string {
  const spec = `${c.word.replace(/:/g, '\\:')}:${c.description}`;
  return `'${spec.replace(/'/g, `'\\''`)}'`;
}

function zsh(all: Level[], top: Candidate[]): string {
  const values = all.flatMap((l) =>
    [...l.values].map(
      ([flag, choices]) =>
        `    "${l.path}/${flag}") candidates=(${choices.map((c) => `'${c.replace(/:/g, '\\:')}'`).join(' ')}) ;;`,
    ),
  );
  const words = all.map(
    (l) => `        "${l.path}") candidates=(${l.candidates.map(describeSpec).join(' ')}) ;;`,
  );
  return `#compdef tally
# Tally admin CLI completion for zsh. Save it as _tally in a folder of $fpath, or load it in
# ~/.zshrc (after compinit) with:
#   source <(tally completion zsh)
_tally() {
  local cmd="" word
  local -a candidates
  local -i i
  for ((i = 2; i < CURRENT; i++)); do
    word="\${words[i]}"
    case "$cmd/$word" in
      ${moves(all)}) cmd="\${cmd:+$cmd }$word" ;;
      "/help") cmd="help"; break ;;
      *) break ;;
    esac
  done
  case "$cmd/\${words[CURRENT-1]}" in
${values.join('\n')}
    *)
      case "$cmd" in
        "help") candidates=(${top.map(describeSpec).join(' ')}) ;;
${words.join('\n')}
      esac
      ;;
  esac
  _describe -t tally 'tally' candidates
}
if [[ "\${funcstack[1]}" == "_tally" ]]; then
  _tally "$@"
else
  compdef _tally tally
fi
`;
}

/** A completion script for `shell`, generated from the program's commands and options. */
export function completionScript(shell: Shell, program: CommandUnknownOpts): string {
  const all = levels(program);
  const top = program.commands.map((c) => ({ word: c.name(), description: c.description() }));
  return shell === 'bash' ? bash(all, top) : zsh(all, top);
}
