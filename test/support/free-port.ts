import * as net from 'node:net';

/**
 * A TCP port on 127.0.0.1 that nothing listens on right now. The Jest specs load as CommonJS and
 * cannot import the ESM twin (`free-port.mjs`) that the plain Node scripts use.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
