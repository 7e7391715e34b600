/** UTF-8 bytes of `s` as a JSON string, quotes included (JSON.stringify escapes lone surrogates). */
export function jsonStringBytes(s: string): number {
  let bytes = 2;
  const n = s.length;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20) bytes += c === 8 || c === 9 || c === 10 || c === 12 || c === 13 ? 2 : 6;
    else if (c === 0x22 || c === 0x5c) bytes += 2;
    else if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      const d = i + 1 < n ? s.charCodeAt(i + 1) : 0;
      if (d >= 0xdc00 && d <= 0xdfff) {
        bytes += 4;
        i++;
      } else bytes += 6;
    } else if (c >= 0xdc00 && c <= 0xdfff) bytes += 6;
    else bytes += 3;
  }
  return bytes;
}

/**
 * The UTF-8 size of `JSON.stringify(value)` for a value that came from JSON.parse, measured with
 * an explicit stack instead of recursion, so that any nesting depth is safe. Stops counting once
 * the size passes `stopAfter` and returns the partial count (which is then above it).
 */
export function jsonByteLength(value: unknown, stopAfter = Infinity): number {
  let bytes = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') bytes += jsonStringBytes(v);
    else if (typeof v === 'number') bytes += Number.isFinite(v) ? String(v).length : 4;
    else if (typeof v === 'boolean') bytes += v ? 4 : 5;
    else if (Array.isArray(v)) {
      // Brackets and the commas between items.
      bytes += v.length === 0 ? 2 : v.length + 1;
      for (let i = v.length - 1; i >= 0; i--) stack.push(v[i]);
    } else if (typeof v === 'object' && v !== null) {
      const keys = Object.keys(v);
      let members = 0;
      for (const key of keys) {
        const member = (v as Record<string, unknown>)[key];
        if (member === undefined || typeof member === 'function') continue;
        members++;
        bytes += jsonStringBytes(key) + 1;
        stack.push(member);
      }
      bytes += members === 0 ? 2 : members + 1;
    } else {
      // null, and undefined inside an array, serialize as null.
      bytes += 4;
    }
    if (bytes > stopAfter) return bytes;
  }
  return bytes;
}
