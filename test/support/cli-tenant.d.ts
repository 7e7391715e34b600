export interface CliTenant {
  appId: string;
  ingestKey: string;
  apiKey: string;
  apiKeyId: string;
}
/** An app with a live ingest key and an API key with `scopes` (both read scopes by default), made through the admin CLI. */
export function makeCliTenant(
  run: (args: string[]) => Promise<Record<string, string>>,
  name: string,
  scopes?: string[],
): Promise<CliTenant>;
