import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Ajv, { type AnySchema, type ValidateFunction } from 'ajv';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { parse } from 'yaml';
import { workspaceRoot } from '@stablepay/node-util';

/**
 * Checks real HTTP answers against an OpenAPI document (docs/openapi.yaml by default): the status must be documented
 * for the operation (or covered by `4XX` / `default`), and the body must match that response's JSON schema,
 * including every `$ref` to `#/components/...`. Both OpenAPI 3.0 (its `nullable`, draft-04 style exclusive bounds)
 * and 3.1 (JSON Schema 2020-12) are read as their version says. On top of the schemas, which leave objects open,
 * a field the body carries that no schema on its path names is reported too: an answer must not grow undocumented
 * fields.
 */
export interface OpenApiAnswer {
  readonly method: string;
  /** The path as requested (`/checkouts/chk_123?limit=2`) or as documented (`/checkouts/{id}`). */
  readonly path: string;
  readonly status: number;
  /** The parsed JSON body (undefined for none); a body of another media type is not read. */
  readonly body: unknown;
  /** The answer's Content-Type, when it should be one the response documents (parameters ignored). */
  readonly contentType?: string | null;
}

type Json = Record<string, unknown>;
type Operation = { responses?: Record<string, Json> };

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const COMPONENTS_ID = 'https://openapi.local/components';
/** OpenAPI's own keywords inside schemas: annotations to a validator. */
const OPENAPI_KEYWORDS = ['example', 'discriminator', 'xml', 'externalDocs'];

export class OpenApiConformance {
  private readonly ajv: Ajv;
  private readonly version: '3.0' | '3.1';
  private readonly paths: Array<{ template: string; pattern: RegExp; literals: number; item: Json }>;
  private readonly components: Json;
  /** components.schemas as the validator reads them, by name. */
  private readonly defs: Json;
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(private readonly document: Json) {
    const version = String(document['openapi'] ?? '');
    if (/^3\.0\./.test(version)) this.version = '3.0';
    else if (/^3\.1\./.test(version)) this.version = '3.1';
    else throw new Error(`OpenAPI version ${version || '(none)'} is not 3.0.x or 3.1.x`);
    const options = { strict: true, strictTypes: false, allowUnionTypes: true, allErrors: true } as const;
    this.ajv = this.version === '3.1' ? new Ajv2020(options) : new Ajv(options);
    addFormats(this.ajv);
    this.ajv.addVocabulary(OPENAPI_KEYWORDS);
    this.components = (document['components'] as Json | undefined) ?? {};
    const schemas = (this.components['schemas'] as Json | undefined) ?? {};
    this.defs = Object.fromEntries(Object.entries(schemas).map(([k, v]) => [k, this.toJsonSchema(v)]));
    this.ajv.addSchema({ $id: COMPONENTS_ID, $defs: this.defs } as AnySchema);
    this.paths = Object.entries((document['paths'] as Json | undefined) ?? {}).map(([template, item]) => {
      const segments = template.split('/');
      const source = segments
        .map((s) => (/^\{[^}]+\}$/.test(s) ? '[^/]+' : s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
        .join('/');
      return {
        template,
        pattern: new RegExp(`^${source}$`),
        literals: segments.filter((s) => !s.startsWith('{')).length,
        item: item as Json,
      };
    });
  }

  static fromFile(file = join(workspaceRoot, 'docs', 'openapi.yaml')): OpenApiConformance {
    return new OpenApiConformance(parse(readFileSync(file, 'utf8')) as Json);
  }

  /** What is wrong with the answer (empty when it conforms). */
  check(answer: OpenApiAnswer): string[] {
    const name = `${answer.method.toUpperCase()} ${answer.path} -> ${answer.status}`;
    const path = answer.path.split('?')[0] ?? '';
    // A literal segment beats a parameter (`/payments/settlement` over `/payments/{paymentId}`).
    const found = this.paths
      .filter((p) => p.pattern.test(path) && p.item[answer.method.toLowerCase()] !== undefined)
      .sort((a, b) => b.literals - a.literals)[0];
    if (!found) return [`${name}: no documented operation`];
    const method = answer.method.toLowerCase();
    if (!METHODS.includes(method)) return [`${name}: not an HTTP method OpenAPI documents`];
    const operation = found.item[method] as Operation;
    const responses = operation.responses ?? {};
    const key = [String(answer.status), `${String(answer.status)[0]}XX`, 'default'].find(
      (k) => responses[k] !== undefined,
    );
    const where = `${method.toUpperCase()} ${found.template} ${key ?? answer.status}`;
    if (key === undefined) return [`${name}: status ${answer.status} is not documented for ${where}`];
    const response = this.deref(responses[key] as Json);
    const media = answer.contentType ? mediaType(answer.contentType) : undefined;
    const documented = Object.keys((response['content'] as Json | undefined) ?? {}).map(mediaType);
    if (media && documented.length > 0 && !documented.includes(media))
      return [`${name}: ${where} documents ${documented.join(', ')}, got ${media}`];
    if (media && media !== 'application/json') return [];
    const validate = this.validator(found.template, method, key, response);
    if (!validate) {
      const content = response['content'] as Record<string, Json> | undefined;
      if (answer.body === undefined || answer.body === '' || content !== undefined) return [];
      return [`${name}: ${where} documents no JSON body, got ${JSON.stringify(answer.body).slice(0, 200)}`];
    }
    return this.problems(name, where, validate, answer.body);
  }

  /**
   * What is wrong with `value` against `schema`, written in this document's dialect with its `$ref`s naming
   * `#/components/schemas/...` of this document: another document's message that carries these objects (a webhook
   * payload of docs/asyncapi.yaml). Checked as an answer's body is; `where` names the schema in the problems and
   * keeps its compiled form for the next value.
   */
  checkValue(name: string, where: string, schema: unknown, value: unknown): string[] {
    let validate = this.compiled.get(where);
    if (!validate) {
      validate = this.ajv.compile(this.toJsonSchema(schema) as AnySchema);
      this.compiled.set(where, validate);
    }
    return this.problems(name, where, validate, value);
  }

  private problems(name: string, where: string, validate: ValidateFunction, body: unknown): string[] {
    const problems: string[] = [];
    if (!validate(body))
      for (const e of validate.errors ?? [])
        problems.push(
          `${name}: body${e.instancePath || ''} ${e.message ?? 'is invalid'}${
            e.params && Object.keys(e.params).length ? ` ${JSON.stringify(e.params)}` : ''
          } (${where}, schema ${e.schemaPath})`,
        );
    for (const field of this.undocumented(body, validate.schema, ''))
      problems.push(`${name}: body${field} is not documented (${where})`);
    return problems;
  }

  /**
   * Compiles every documented JSON response and request schema and every component schema: what stops a schema from validating
   * anything (an unknown keyword, often a YAML flow mapping split at a comma inside an unquoted description).
   */
  schemaProblems(): string[] {
    const problems: string[] = [];
    for (const { template, item } of this.paths)
      for (const method of METHODS.filter((m) => item[m] !== undefined))
        for (const [status, response] of Object.entries((item[method] as Operation).responses ?? {})) {
          const where = `${method.toUpperCase()} ${template} ${status}`;
          try {
            this.validator(template, method, status, response);
          } catch (error) {
            problems.push(`${where}: ${error instanceof Error ? error.message : String(error)}`);
          }
        }
    for (const { template, item } of this.paths)
      for (const method of METHODS.filter((m) => item[m] !== undefined)) {
        const body = this.deref(((item[method] as Json)['requestBody'] as Json | undefined) ?? {});
        const content = (body['content'] as Record<string, Json> | undefined) ?? {};
        const schema = Object.entries(content).find(([k]) => mediaType(k) === 'application/json')?.[1]?.[
          'schema'
        ];
        if (schema === undefined) continue;
        try {
          this.ajv.compile(this.toJsonSchema(schema) as AnySchema);
        } catch (error) {
          problems.push(
            `${method.toUpperCase()} ${template} request: ${error instanceof Error ? error.message : String(error)}`,
          );
        }
      }
    for (const name of Object.keys(this.defs))
      try {
        this.ajv.compile({ $ref: `${COMPONENTS_ID}#/$defs/${name}` });
      } catch (error) {
        problems.push(
          `components.schemas.${name}: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
    return problems;
  }

  /** Throws, listing every problem, unless the answer conforms. */
  assert(answer: OpenApiAnswer): void {
    const problems = this.check(answer);
    if (problems.length > 0)
      throw new Error(`Answer does not conform to OpenAPI:\n- ${problems.join('\n- ')}`);
  }

  /** The compiled schema of a response's JSON body (undefined when it documents none). */
  private validator(
    template: string,
    method: string,
    status: string,
    response: Json,
  ): ValidateFunction | undefined {
    const id = `${template} ${method} ${status}`;
    const known = this.compiled.get(id);
    if (known) return known;
    const content = (this.deref(response)['content'] as Record<string, Json> | undefined) ?? {};
    const media = Object.entries(content).find(([k]) => mediaType(k) === 'application/json')?.[1];
    if (!media?.['schema']) return undefined;
    const validate = this.ajv.compile(this.toJsonSchema(media['schema']) as AnySchema);
    this.compiled.set(id, validate);
    return validate;
  }

  /** A response object, following `$ref: '#/components/responses/...'`. */
  private deref(value: Json): Json {
    const ref = value['$ref'];
    if (typeof ref !== 'string') return value;
    const target = this.pointer(ref);
    if (!target) throw new Error(`unresolved ${ref}`);
    return this.deref(target);
  }

  private pointer(ref: string): Json | undefined {
    if (!ref.startsWith('#/')) return undefined;
    let at: unknown = this.document;
    for (const raw of ref.slice(2).split('/')) {
      const part = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
      at = at && typeof at === 'object' ? (at as Json)[part] : undefined;
    }
    return at as Json | undefined;
  }

  /**
   * An OpenAPI schema as the validator's JSON Schema: `#/components/schemas/X` refs point into the components schema
   * registered once; under 3.0, `nullable: true` admits null and boolean exclusive bounds become numbers.
   */
  private toJsonSchema(value: unknown): unknown {
    if (Array.isArray(value)) return value.map((v) => this.toJsonSchema(v));
    if (!value || typeof value !== 'object') return value;
    const out: Json = {};
    for (const [k, v] of Object.entries(value as Json)) {
      // Specification extensions say nothing about the value.
      if (k.startsWith('x-')) continue;
      // Ajv would honour it, but a 3.1 reader does not: null would pass here and fail in a generated client.
      if (k === 'nullable' && this.version === '3.1')
        throw new Error('`nullable` is OpenAPI 3.0: a 3.1 schema admits null with type [..., "null"]');
      if (k === '$ref' && typeof v === 'string') out[k] = this.componentRef(v);
      // `properties` / `$defs` hold names, not keywords: convert their values only.
      else if (
        (k === 'properties' || k === 'patternProperties' || k === '$defs') &&
        v &&
        typeof v === 'object'
      )
        out[k] = Object.fromEntries(Object.entries(v as Json).map(([n, s]) => [n, this.toJsonSchema(s)]));
      else out[k] = this.toJsonSchema(v);
    }
    return this.version === '3.0' ? fromOpenApi30(out) : out;
  }

  private componentRef(ref: string): string {
    const match = /^#\/components\/schemas\/(.+)$/.exec(ref);
    if (!match?.[1]) throw new Error(`only #/components/schemas refs are supported in schemas, got ${ref}`);
    return `${COMPONENTS_ID}#/$defs/${match[1]}`;
  }

  /** Fields of `value` that no schema reachable at their place names (objects without named properties are free). */
  private undocumented(value: unknown, schema: unknown, at: string): string[] {
    if (!value || typeof value !== 'object') return [];
    const branches = this.branches(schema, value);
    if (Array.isArray(value)) {
      const items = branches.map((b) => b['items']).filter((s) => s !== undefined);
      if (items.length === 0) return [];
      return value.flatMap((v, i) => this.undocumented(v, { allOf: items }, `${at}[${i}]`));
    }
    // A branch that allows any field (no `properties`, or additionalProperties not false) leaves the object open.
    const named = branches.filter((b) => b['properties'] !== undefined);
    if (named.length === 0) return [];
    if (
      branches.some(
        (b) =>
          (b['additionalProperties'] !== undefined && b['additionalProperties'] !== false) ||
          b['patternProperties'] !== undefined,
      )
    )
      return [];
    const problems: string[] = [];
    for (const [key, v] of Object.entries(value as Json)) {
      const subs = named
        .map((b) => (b['properties'] as Json)[key])
        .filter((s): s is NonNullable<unknown> => s !== undefined);
      if (subs.length === 0) problems.push(`${at}.${key}`);
      else problems.push(...this.undocumented(v, { allOf: subs }, `${at}.${key}`));
    }
    return problems;
  }

  /**
   * Every object schema `value` has to satisfy here: `$ref`s followed, allOf/anyOf/oneOf flattened. Of an anyOf or
   * oneOf only the branches the value matches count (all of them when it matches none: the validator reports that),
   * so a free-form branch beside named ones leaves open only the values it is for, and a field of another branch is
   * not documented for this one. Every branch kept applies to the value, so a field's schemas are all of theirs.
   */
  private branches(schema: unknown, value: unknown, seen = new Set<unknown>()): Json[] {
    if (!schema || typeof schema !== 'object' || seen.has(schema)) return [];
    seen.add(schema);
    const s = schema as Json;
    const out: Json[] = [s];
    if (typeof s['$ref'] === 'string')
      out.push(...this.branches(this.defs[s['$ref'].slice(`${COMPONENTS_ID}#/$defs/`.length)], value, seen));
    for (const k of ['allOf', 'anyOf', 'oneOf']) {
      const subs = (s[k] as unknown[] | undefined) ?? [];
      const matching = k === 'allOf' ? subs : subs.filter((sub) => this.matches(sub, value));
      for (const sub of matching.length > 0 ? matching : subs) out.push(...this.branches(sub, value, seen));
    }
    return out;
  }

  private readonly branchValidators = new WeakMap<object, ValidateFunction>();

  private matches(schema: unknown, value: unknown): boolean {
    if (typeof schema === 'boolean') return schema;
    if (!schema || typeof schema !== 'object') return false;
    let validate = this.branchValidators.get(schema);
    if (!validate) {
      validate = this.ajv.compile(schema as AnySchema);
      this.branchValidators.set(schema, validate);
    }
    return validate(value);
  }
}

/** A media type without its parameters (`text/csv; charset=utf-8` is `text/csv`). */
function mediaType(value: string): string {
  return (value.split(';')[0] ?? '').trim().toLowerCase();
}

/** OpenAPI 3.0's schema dialect to JSON Schema: `nullable`, and draft-04's boolean exclusive bounds. */
function fromOpenApi30(schema: Json): Json {
  const out: Json = { ...schema };
  for (const [flag, bound] of [
    ['exclusiveMinimum', 'minimum'],
    ['exclusiveMaximum', 'maximum'],
  ] as const) {
    if (typeof out[flag] === 'boolean') {
      if (out[flag] === true) out[flag] = out[bound];
      else delete out[flag];
      if (out[flag] !== undefined) delete out[bound];
    }
  }
  if (out['nullable'] !== true) {
    delete out['nullable'];
    return out;
  }
  delete out['nullable'];
  // A $ref's siblings are ignored in 3.0, and so is a `type` shared with allOf/oneOf: admit null beside the whole.
  if (out['$ref'] !== undefined || out['allOf'] || out['oneOf'] || out['anyOf'] || out['type'] === undefined)
    return { anyOf: [out, { type: 'null' }] };
  const type = out['type'];
  out['type'] = Array.isArray(type) ? [...type, 'null'] : [type, 'null'];
  if (Array.isArray(out['enum']) && !out['enum'].includes(null)) out['enum'] = [...out['enum'], null];
  return out;
}
