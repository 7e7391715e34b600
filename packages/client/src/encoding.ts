const nodeBuffer = (globalThis as { Buffer?: { byteLength(s: string, encoding: 'utf8'): number } }).Buffer;

/** UTF-8 size of a string, without encoding it (Node's native count where there is one). */
export function utf8Length(s: string): number {
  return nodeBuffer ? nodeBuffer.byteLength(s, 'utf8') : countUtf8(s);
}

export function countUtf8(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      // A surrogate pair: 4 bytes for 2 units.
      n += 2;
      i++;
    } else n += 2;
  }
  return n;
}

const isNode = typeof process !== 'undefined' && typeof process.versions?.node === 'string';

type Gzip = (body: string) => Promise<Uint8Array>;
let gzipImpl: Promise<Gzip> | undefined;

async function loadGzip(): Promise<Gzip> {
  if (isNode) {
    const zlib = await import('node:zlib');
    return (body) =>
      new Promise((resolve, reject) =>
        zlib.gzip(body, { level: 1 }, (err, out) => (err ? reject(err) : resolve(out))),
      );
  }
  return async (body) => {
    const stream = new Blob([body]).stream().pipeThrough(new CompressionStream('gzip'));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  };
}

/** gzip with node:zlib in Node, CompressionStream in a browser. */
export async function gzip(body: string): Promise<Uint8Array> {
  gzipImpl ??= loadGzip();
  return (await gzipImpl)(body);
}
