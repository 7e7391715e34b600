import { CONFIG_GROUPS, type ConfigGroup, Derived, type Setting } from './setting';
import { SETTINGS } from './settings';

/**
 * Writes `.env.example` and the configuration tables of docs/operations.md from SETTINGS, so that
 * neither can drift from what the service reads. `npm run config:docs` rewrites both; the spec next
 * to this file fails while a committed copy differs.
 */

const ENV_WIDTH = 100;

const ENV_HEADER = [
  '# Tally configuration. Every variable is optional; the value shown is the default.',
  '# The service validates all of them at start and exits with a message naming a bad one.',
  '# Generated from src/config/settings.ts by `npm run config:docs`: edit the table there, not this file.',
];

function allSettings(): Setting<unknown>[] {
  return Object.values(SETTINGS) as Setting<unknown>[];
}

function settingsOf(group: ConfigGroup): Setting<unknown>[] {
  return allSettings().filter((s) => s.group === group);
}

/** Markdown to the plain text of a comment: no code spans, links as their text. */
function plain(markdown: string): string {
  return markdown.replace(/\[([^\]]+)\]\([^)]*\)/g, '$1').replace(/`/g, '');
}

function commentLines(text: string): string[] {
  const lines: string[] = [];
  let line = '#';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line.length > 1 && line.length + 1 + word.length > ENV_WIDTH) {
      lines.push(line);
      line = '#';
    }
    line += ` ${word}`;
  }
  lines.push(line);
  return lines;
}

function envEntry(setting: Setting<unknown>): string[] {
  const fallback = setting.default;
  if (fallback instanceof Derived) {
    // A doc that explains its default already says it in full.
    const said = setting.doc.includes('Default:');
    const comment = said ? plain(setting.doc) : `${plain(setting.doc)} Default: ${plain(fallback.doc)}.`;
    return [...commentLines(comment), `#${setting.env}=${fallback.example}`];
  }
  const value = fallback === undefined ? '' : String(fallback);
  return [...commentLines(plain(setting.doc)), `${setting.env}=${value}`];
}

export function renderEnvExample(): string {
  const lines = [...ENV_HEADER];
  for (const [group, title] of Object.entries(CONFIG_GROUPS) as [ConfigGroup, string][]) {
    lines.push('', `# --- ${title} ---`);
    for (const setting of settingsOf(group)) lines.push('', ...envEntry(setting));
  }
  return lines.join('\n') + '\n';
}

function defaultCell(setting: Setting<unknown>): string {
  if (setting.defaultDoc !== undefined) return setting.defaultDoc;
  const fallback = setting.default;
  if (fallback instanceof Derived) return fallback.doc;
  return fallback === undefined ? 'unset' : `\`${String(fallback)}\``;
}

/** A Markdown table with its columns padded to one width, as prettier lays tables out. */
function markdownTable(header: string[], rows: string[][]): string[] {
  const cells = [header, ...rows].map((row) => row.map((cell) => cell.replace(/\|/g, '\\|')));
  const widths = header.map((_, i) => Math.max(3, ...cells.map((row) => row[i].length)));
  const line = (row: string[]) => `| ${row.map((cell, i) => cell.padEnd(widths[i])).join(' | ')} |`;
  const rule = `| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |`;
  return [line(cells[0]), rule, ...cells.slice(1).map(line)];
}

export function renderDocsTable(group: ConfigGroup): string[] {
  const rows = settingsOf(group).map((s) => [`\`${s.env}\``, defaultCell(s), s.doc]);
  return markdownTable(['Variable', 'Default', 'Meaning'], rows);
}

const TABLE_START = /^<!-- config-table: ([a-z]+) -->$/;
const TABLE_END = '<!-- /config-table -->';

/**
 * docs/operations.md with each block between `<!-- config-table: <group> -->` and
 * `<!-- /config-table -->` replaced by that group's table. Every group must have one block.
 */
export function renderOperationsDoc(markdown: string): string {
  const out: string[] = [];
  const seen = new Set<string>();
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    out.push(lines[i]);
    const start = TABLE_START.exec(lines[i]);
    if (!start) continue;
    const group = start[1];
    if (!(group in CONFIG_GROUPS) || seen.has(group))
      throw new Error(`unknown or repeated config table "${group}"`);
    seen.add(group);
    const end = lines.indexOf(TABLE_END, i);
    if (end < 0) throw new Error(`config table "${group}" has no end marker`);
    out.push(...renderDocsTable(group as ConfigGroup), TABLE_END);
    i = end;
  }
  const missing = Object.keys(CONFIG_GROUPS).filter((g) => !seen.has(g));
  if (missing.length) throw new Error(`docs have no config table for ${missing.join(', ')}`);
  return out.join('\n');
}
