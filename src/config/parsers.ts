import * as path from 'node:path';
import { isIP } from 'node:net';

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`Invalid configuration: ${variable} ${message}`);
    this.name = 'ConfigError';
  }
}

/**
 * Turns one variable's value (trimmed, never empty: an empty value means "use the default") into
 * a setting, or throws a ConfigError naming the variable.
 */
export type Parser<T> = (value: string, name: string) => T;

export function int(min: number, max: number): Parser<number> {
  return (value, name) => {
    if (!/^-?\d+$/.test(value)) throw new ConfigError(name, `must be an integer, got "${value}"`);
    const n = Number(value);
    if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
    return n;
  };
}

export const bool: Parser<boolean> = (value, name) => {
  if (/^(true|1|yes|on)$/i.test(value)) return true;
  if (/^(false|0|no|off)$/i.test(value)) return false;
  throw new ConfigError(name, `must be true or false, got "${value}"`);
};

export function oneOf<T extends string>(allowed: readonly T[]): Parser<T> {
  return (value, name) => {
    if (!(allowed as readonly string[]).includes(value)) {
      throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${value}"`);
    }
    return value as T;
  };
}

export function url(protocols: string[]): Parser<string> {
  return (value, name) => {
    let parsed: URL;
    try {
      parsed = new URL(value);
    } catch {
      throw new ConfigError(name, 'must be a URL');
    }
    if (!protocols.includes(parsed.protocol)) {
      throw new ConfigError(name, `must use one of ${protocols.join(', ')}`);
    }
    return value;
  };
}

export const text: Parser<string> = (value) => value;

/** A path, resolved against the current directory. */
export const absolutePath: Parser<string> = (value) => path.resolve(value);

/** A setting that may stay unset: its value type admits `undefined`, which is its default. */
export function optional<T>(parse: Parser<T>): Parser<T | undefined> {
  return parse;
}

export const redisPrefix: Parser<string> = (value, name) => {
  if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(value)) {
    throw new ConfigError(name, `must be 1-64 characters of A-Z a-z 0-9 _ . : -, got "${value}"`);
  }
  return value;
};

const PROXY_NAMES = ['loopback', 'linklocal', 'uniquelocal'];

function isAddressOrCidr(entry: string): boolean {
  const [address, bits, ...rest] = entry.split('/');
  const family = isIP(address);
  if (!family || rest.length) return false;
  if (bits === undefined) return true;
  if (!/^\d{1,3}$/.test(bits)) return false;
  return Number(bits) <= (family === 4 ? 32 : 128);
}

/**
 * TRUST_PROXY: false, a hop count, or a comma-separated list of proxy addresses, CIDRs and
 * Express's names. `true` (trust every hop) is refused: the left-most X-Forwarded-For entry,
 * which it would take, is whatever the client wrote.
 */
export const trustProxy: Parser<false | number | string[]> = (value, name) => {
  if (/^(false|0|no|off)$/i.test(value)) return false;
  if (/^(true|yes|on)$/i.test(value)) {
    throw new ConfigError(
      name,
      'must be a hop count (e.g. 1) or the proxy addresses/CIDRs, not "true": trusting every hop lets clients choose their address',
    );
  }
  if (/^\d+$/.test(value)) {
    const hops = Number(value);
    if (hops > 100) throw new ConfigError(name, `must be a hop count between 1 and 100, got ${hops}`);
    return hops;
  }
  const entries = value.split(',').map((e) => e.trim().toLowerCase());
  const bad = entries.find((e) => !PROXY_NAMES.includes(e) && !isAddressOrCidr(e));
  if (bad !== undefined) {
    throw new ConfigError(
      name,
      `must be false, a hop count, or a list of addresses, CIDRs, loopback, linklocal, uniquelocal; "${bad}" is none of these`,
    );
  }
  return entries;
};
