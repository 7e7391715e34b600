import type { Parser } from './parsers';

/**
 * The sections of `.env.example` and of the configuration tables in docs/operations.md, in the
 * order they appear there.
 */
export const CONFIG_GROUPS = {
  http: 'HTTP and process',
  database: 'Database',
  redis: 'Redis',
  keys: 'Keys',
  ingest: 'Ingest',
  limits: 'Rate limits',
  jobs: 'Rollups and retention',
  dashboard: 'Dashboard',
  export: 'Export',
} as const;
export type ConfigGroup = keyof typeof CONFIG_GROUPS;

/**
 * A default worked out when the configuration is loaded: from other settings (named in `uses`,
 * which must come earlier in the table) or from the machine.
 */
export class Derived<T> {
  constructor(
    readonly uses: readonly string[],
    readonly compute: (settings: Record<string, unknown>) => T,
    /** The default as the docs say it. */
    readonly doc: string,
    /** A value shown, commented out, in `.env.example`. */
    readonly example: string,
  ) {}
}

export function derived<T, Uses extends object = object>(spec: {
  uses?: (keyof Uses & string)[];
  compute: (settings: Uses) => T;
  doc: string;
  example: string;
}): Derived<T> {
  return new Derived(
    spec.uses ?? [],
    spec.compute as (settings: Record<string, unknown>) => T,
    spec.doc,
    spec.example,
  );
}

/** One environment variable: its name, how it is read, its default and what it does. */
export interface Setting<T> {
  readonly env: string;
  readonly group: ConfigGroup;
  readonly parse: Parser<T>;
  /** Used when the variable is unset or blank. A setting whose parser is `optional(…)` may default to undefined. */
  readonly default: NoInfer<T> | Derived<NoInfer<T>>;
  /** One line for the docs table and `.env.example` (Markdown). */
  readonly doc: string;
  /** The default as the docs table shows it, when the bare value would not say enough. */
  readonly defaultDoc?: string;
}

export function setting<T>(spec: Setting<T>): Setting<T> {
  return spec;
}

/** The value type of a setting. */
export type SettingValue<S> = S extends Setting<infer T> ? T : never;
