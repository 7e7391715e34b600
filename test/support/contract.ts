import { UUID } from '@app/common/ids';
import type { INestApplication } from '@nestjs/common';
import type { OpenAPIObject } from '@nestjs/swagger';
import Ajv2020 from 'ajv/dist/2020';
import type { ErrorObject, ValidateFunction } from 'ajv/dist/2020';
import type { Response } from 'supertest';
import { buildOpenApiDocument } from '@app/ops/openapi';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

// The formats the document uses, checked strictly enough to catch a wrong shape.
const FORMATS: Record<string, RegExp> = {
  date: /^\d{4}-\d{2}-\d{2}$/,
  'date-time': /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i,
  uuid: UUID,
  uri: /^[a-z][a-z0-9+.-]*:\S*$/i,
  int64: /^-?\d+$/,
};

/** Rewrites `#/components/schemas/X` to `#/$defs/X`, so that one JSON schema holds everything. */
function toJsonSchemaRefs(node: Json): Json {
  if (Array.isArray(node)) return node.map(toJsonSchemaRefs);
  if (node && typeof node === 'object') {
    return Object.fromEntries(
      Object.entries(node).map(([k, v]) => [
        k,
        k === '$ref' && typeof v === 'string'
          ? v.replace('#/components/schemas/', '#/$defs/')
          : toJsonSchemaRefs(v),
      ]),
    );
  }
  return node;
}

function mediaType(res: Response): string {
  return String(res.headers['content-type'] ?? '')
    .split(';')[0]
    .trim()
    .toLowerCase();
}

/**
 * Validates HTTP responses against the OpenAPI document the application generates, with ajv
 * (JSON Schema 2020-12, the dialect of OpenAPI 3.1). Usage in an e2e spec:
 *
 *   const contract = new Contract(t.app);
 *   contract.expect(res, 'get', '/api/v1/events');
 *
 * It fails when the document has no response for the status and media type, or when the body
 * does not match the schema.
 */
export class Contract {
  readonly document: OpenAPIObject;
  private readonly ajv: Ajv2020;
  private readonly defs: Json;
  private readonly cache = new Map<string, ValidateFunction>();

  constructor(appOrDocument: INestApplication | OpenAPIObject) {
    this.document =
      'openapi' in appOrDocument
        ? (appOrDocument as OpenAPIObject)
        : buildOpenApiDocument(appOrDocument as INestApplication);
    // OpenAPI adds keywords JSON Schema does not know (example, xml, discriminator...).
    this.ajv = new Ajv2020({ strict: false, allErrors: true });
    for (const [name, pattern] of Object.entries(FORMATS)) this.ajv.addFormat(name, pattern);
    this.defs = toJsonSchemaRefs((this.document.components?.schemas ?? {}) as Json);
  }

  /** The response schema for (method, path template, status, media type), or throws. */
  schemaFor(method: string, path: string, status: number, type: string): Json {
    const operation = (this.document.paths[path] as Record<string, unknown> | undefined)?.[
      method.toLowerCase()
    ] as { responses?: Record<string, { content?: Record<string, { schema?: Json }> }> } | undefined;
    if (!operation) throw new Error(`The OpenAPI document has no operation ${method.toUpperCase()} ${path}`);
    const responses = operation.responses ?? {};
    const response = responses[String(status)] ?? responses[`${String(status)[0]}XX`] ?? responses['default'];
    if (!response) {
      throw new Error(
        `${method.toUpperCase()} ${path} documents no ${status} response (has ${Object.keys(responses).join(', ')})`,
      );
    }
    const media = response.content?.[type];
    if (!media?.schema) {
      throw new Error(
        `${method.toUpperCase()} ${path} ${status} documents no ${type} body (has ${Object.keys(response.content ?? {}).join(', ') || 'none'})`,
      );
    }
    return media.schema;
  }

  /** Throws unless `res` matches the documented response of `method path`. */
  expect(res: Response, method: string, path: string): void {
    const type = mediaType(res);
    const key = `${method} ${path} ${res.status} ${type}`;
    let validate = this.cache.get(key);
    if (!validate) {
      const schema = toJsonSchemaRefs(this.schemaFor(method, path, res.status, type));
      validate = this.ajv.compile({ $defs: this.defs, ...(schema as object) });
      this.cache.set(key, validate);
    }
    const body = type.endsWith('json') ? res.body : res.text;
    if (!validate(body)) {
      const details = (validate.errors ?? [])
        .map((e: ErrorObject) => `${e.instancePath || '(body)'} ${e.message}`)
        .join('; ');
      throw new Error(`${key}: body does not match the OpenAPI schema: ${details}`);
    }
  }
}
