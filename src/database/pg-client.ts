import { Client, type ClientConfig } from 'pg';

/**
 * A connected client of its own, outside any pool. A server that goes away makes an idle client
 * emit 'error', which is left to the owner's next query to find; a client that fails to connect
 * is ended before the error goes on.
 */
export async function connectClient(config: ClientConfig): Promise<Client> {
  const client = new Client(config);
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (err) {
    await client.end().catch(() => undefined);
    throw err;
  }
  return client;
}
