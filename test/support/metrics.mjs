/**
 * The value of one sample line of a Prometheus exposition, or undefined. The plain Node scripts'
 * twin of metrics.ts: the Jest specs load as CommonJS and cannot import this ESM file.
 */
export function sample(text, name, labels = {}) {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const present = (match[3] ?? '').split(/,(?=[a-zA-Z_]+=")/);
    if (wanted.every((w) => present.includes(w))) return Number(match[4]);
  }
  return undefined;
}
