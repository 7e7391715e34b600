/** The export's output formats. A file of its own: the CLI's command line loads it without Nest. */
export const EXPORT_FORMATS = ['ndjson', 'parquet'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];
