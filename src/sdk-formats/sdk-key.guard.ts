import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { bearerToken, requestKey } from '@app/auth/authenticated-request';
import { KeyAuthenticator } from '@app/auth/key-auth';
import { IngestBodyReader, type BodyFormat, type IngestBody } from '@app/ingest/ingest-body.reader';
import { CpuMeter, IngestCpuBudgets } from '@app/ingest/ingest-cpu.budget';
import { AppError } from '@app/common/app-error';
import { parseJsonBody, type BodyPeek } from '@app/common/http/json-body';
import { postHogKeyOf } from './posthog.mapping';
import { isObject } from './sdk-mapping';

const BODY = Symbol('tally.sdkBody');

/**
 * Bodies read before their key is known (a key in the body) share this in-flight budget
 * (INGEST_MAX_INFLIGHT_BYTES_PER_KEY), so that clients without a valid key cannot hold more.
 */
const UNAUTHENTICATED = 'sdk-body-key';

/** A body a guard had to read to find the key, and the CPU that reading took. */
export interface PreReadBody {
  /**
   * The parsed body: parsed already, or now (when the key was the body's first member, the
   * parse waits until the key has been admitted, so that a refused request never pays it).
   * 400 `invalid_json`, or `invalid_body` when the body names a second, different key.
   */
  body(): IngestBody;
  /** Charged to the key once it is known, as the read of any ingest body is. */
  cpu: CpuMeter;
}

/** The most of a body's start searched for its leading key member. */
const LEADING_BYTES = 1024;

const leadingPatterns = new Map<string, RegExp>();

/**
 * The value of `member` when it is the body's first member and a plain string (as
 * `{"api_key":"tly_…",` from posthog-node), else null: found without parsing the body. The body
 * is read as Latin-1, so a UTF-8 byte order mark is its three bytes; a key is printable ASCII.
 */
export function leadingMember(bytes: Buffer, member: string): string | null {
  let pattern = leadingPatterns.get(member);
  if (pattern === undefined) {
    const space = '[ \\t\\r\\n]*';
    pattern = new RegExp(
      `^(?:\\u00ef\\u00bb\\u00bf)?${space}\\{${space}"${member}"${space}:${space}"([\\x21\\x23-\\x5b\\x5d-\\x7e]{1,512})"`,
    );
    leadingPatterns.set(member, pattern);
  }
  const match = pattern.exec(bytes.toString('latin1', 0, Math.min(bytes.length, LEADING_BYTES)));
  return match ? match[1] : null;
}

/** The body a guard had to read to find the key, if any. */
export function preReadBody(req: Request): PreReadBody | undefined {
  return (req as unknown as Record<symbol, PreReadBody | undefined>)[BODY];
}

/** The user name of HTTP Basic credentials (Segment's write key, with an empty password). */
export function basicUser(req: Request): string | null {
  const header = req.headers.authorization;
  if (typeof header !== 'string') return null;
  const match = /^Basic[ ]+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  if (!match) return null;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const user = colon === -1 ? decoded : decoded.slice(0, colon);
  return user === '' ? null : user;
}

/** Whether the PostHog body is gzip by its query (`?compression=gzip-js`), whatever its headers. */
export function postHogFormat(req: Request): BodyFormat {
  return { textPlain: true, gzip: req.query.compression === 'gzip-js' };
}

export const SEGMENT_FORMAT: BodyFormat = { textPlain: true };

/**
 * Authenticates the ingest key where an SDK puts it: in a header when there is one (then the
 * body is read after the guards, as for POST /api/ingest), else in the body, which is read
 * first, within ingest's limits, and kept for the handler.
 */
@Injectable()
abstract class SdkKeyGuard implements CanActivate {
  constructor(
    private readonly auth: KeyAuthenticator,
    private readonly reader: IngestBodyReader,
    private readonly budgets: IngestCpuBudgets,
  ) {}

  protected abstract headerKey(req: Request): string | null;
  protected abstract bodyKey(body: unknown): string | null;
  protected abstract format(req: Request): BodyFormat;
  /** The body member that holds the key when the SDK writes it first. */
  protected abstract readonly keyMember: string;

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const req = context.switchToHttp().getRequest<Request>();
    const fromHeader = this.headerKey(req);
    if (fromHeader !== null || req.headers.authorization !== undefined) {
      await this.auth.authenticate(req, 'ingest', fromHeader);
      return true;
    }
    const cpu = new CpuMeter();
    // A key written first is known from the body's first bytes: a wrong key, or one past its CPU
    // share, is refused there, and the rest of the body is never read.
    let peeked: string | null = null;
    const peek: BodyPeek = {
      bytes: LEADING_BYTES,
      check: async (prefix) => {
        const key = leadingMember(prefix, this.keyMember);
        if (key === null) return null;
        // A wrong key's 401 ends the read as it is thrown (BodyPeek).
        await this.auth.authenticate(req, 'ingest', key);
        peeked = key;
        const refused = this.budgets.refusal(requestKey(req).id);
        return refused === null ? null : this.budgets.hold(refused);
      },
    };
    const bytes = await this.reader.readBytes(req, UNAUTHENTICATED, cpu, this.format(req), peek);
    const leading = leadingMember(bytes, this.keyMember);
    const keep = (pre: PreReadBody) => ((req as unknown as Record<symbol, PreReadBody>)[BODY] = pre);
    if (leading !== null) {
      // The key is known without parsing: a key past its budget is refused before the parse.
      let parsed: IngestBody | null = null;
      keep({
        cpu,
        body: () => {
          parsed ??= parseJsonBody(bytes);
          if (this.bodyKey(parsed.value) !== leading) {
            throw new AppError(
              'invalid_body',
              'The body names its key twice, with different values; nothing was stored.',
            );
          }
          return parsed;
        },
      });
      if (peeked !== leading) await this.auth.authenticate(req, 'ingest', leading);
      return true;
    }
    const body = cpu.time(() => parseJsonBody(bytes));
    keep({ cpu, body: () => body });
    await this.auth.authenticate(req, 'ingest', this.bodyKey(body.value));
    return true;
  }
}

/** Segment: HTTP Basic with the write key as user name, a Bearer header, or `writeKey` in the body. */
@Injectable()
export class SegmentKeyGuard extends SdkKeyGuard {
  protected readonly keyMember = 'writeKey';

  protected headerKey(req: Request): string | null {
    return basicUser(req) ?? bearerToken(req);
  }

  protected bodyKey(body: unknown): string | null {
    return isObject(body) && typeof body.writeKey === 'string' ? body.writeKey : null;
  }

  protected format(): BodyFormat {
    return SEGMENT_FORMAT;
  }
}

/** PostHog: a Bearer header, or `api_key` (or `token`) in the body. */
@Injectable()
export class PostHogKeyGuard extends SdkKeyGuard {
  protected readonly keyMember = 'api_key';

  protected headerKey(req: Request): string | null {
    return bearerToken(req);
  }

  protected bodyKey(body: unknown): string | null {
    return postHogKeyOf(body);
  }

  protected format(req: Request): BodyFormat {
    return postHogFormat(req);
  }
}
