// UUIDv7 (RFC 9562): 48-bit Unix milliseconds, then random bits. Time-ordered, so the server's
// dedup index stays local. Randomness is drawn in blocks to keep track() cheap.

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
const POOL_SIZE = 16 * 256;
let pool = new Uint8Array(0);
let offset = POOL_SIZE;

function random10(): number {
  if (offset + 10 > pool.length) {
    if (pool.length === 0) pool = new Uint8Array(POOL_SIZE);
    globalThis.crypto.getRandomValues(pool);
    offset = 0;
  }
  const at = offset;
  offset += 10;
  return at;
}

let prefixMs = -1;
let prefix = '';

/** `tttttttt-tttt-7`: 48 bits of time as 12 hex digits and the version, made once per millisecond. */
function timePrefix(ms: number): string {
  if (ms !== prefixMs) {
    const t = Math.floor(ms).toString(16).padStart(12, '0').slice(-12);
    prefix = `${t.slice(0, 8)}-${t.slice(8, 12)}-7`;
    prefixMs = ms;
  }
  return prefix;
}

/** A new UUIDv7 for the time `ms` (epoch milliseconds). */
export function uuidv7(ms: number = Date.now()): string {
  const r = random10();
  const p = pool;
  return (
    timePrefix(ms) +
    HEX[p[r]].slice(1) +
    HEX[p[r + 1]] +
    '-' +
    HEX[(p[r + 2] & 0x3f) | 0x80] +
    HEX[p[r + 3]] +
    '-' +
    HEX[p[r + 4]] +
    HEX[p[r + 5]] +
    HEX[p[r + 6]] +
    HEX[p[r + 7]] +
    HEX[p[r + 8]] +
    HEX[p[r + 9]]
  );
}
