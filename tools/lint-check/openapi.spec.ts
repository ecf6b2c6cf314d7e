import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';

/**
 * docs/openapi.yaml is maintained by hand: these checks keep the answers every route can give on every operation,
 * so a client generated from it knows them.
 */
type Responses = Record<string, { $ref?: string }>;
const spec = parse(readFileSync(join(__dirname, '..', '..', 'docs', 'openapi.yaml'), 'utf8')) as {
  paths: Record<string, Record<string, { responses?: Responses }>>;
  components: { responses: Record<string, unknown> };
};
const METHODS = ['get', 'post', 'put', 'patch', 'delete'];
/** Probes and metrics are never rate limited (rate-limits.ts UNLIMITED). */
const UNLIMITED = ['/health', '/ready', '/metrics'];
const operations = Object.entries(spec.paths).flatMap(([path, item]) =>
  Object.entries(item)
    .filter(([method]) => METHODS.includes(method))
    .map(([method, op]) => ({
      name: `${method.toUpperCase()} ${path}`,
      path,
      method,
      responses: op.responses ?? {},
    })),
);
const ref = (name: string) => `#/components/responses/${name}`;

describe('docs/openapi.yaml', () => {
  it('documents 429 RateLimited on every rate-limited operation', () => {
    const missing = operations
      .filter((op) => !UNLIMITED.includes(op.path))
      .filter((op) => op.responses['429']?.$ref !== ref('RateLimited'))
      .map((op) => op.name);
    expect(missing).toEqual([]);
  });

  it('documents 415 UnsupportedMediaType on every operation that takes a body', () => {
    const missing = operations
      .filter((op) => ['post', 'put', 'patch'].includes(op.method))
      .filter((op) => op.responses['415']?.$ref !== ref('UnsupportedMediaType'))
      .map((op) => op.name);
    expect(missing).toEqual([]);
  });

  it('documents 413 RequestTooLarge on every operation that takes a body', () => {
    const missing = operations
      .filter((op) => ['post', 'put', 'patch'].includes(op.method))
      .filter((op) => op.responses['413']?.$ref !== ref('RequestTooLarge'))
      .map((op) => op.name);
    expect(missing).toEqual([]);
  });

  it('names a nested parameter as the API does, in brackets (metadata[plan_name]), in the docs and the spec', () => {
    const docs = join(__dirname, '..', '..', 'docs');
    const dotted = readdirSync(docs)
      .filter((file) => /\.(md|yaml)$/.test(file))
      .flatMap((file) =>
        [...readFileSync(join(docs, file), 'utf8').matchAll(/`[a-z_]+\.<[a-z]+>`/g)].map(
          (m) => `${file}: ${m[0]}`,
        ),
      );
    expect(dotted).toEqual([]);
  });

  it('never documents an integer string that the API would refuse for a leading zero', () => {
    // Every integer string the API reads (amounts, deadlines, fiat amounts) refuses a leading zero ("0842683"):
    // `^[0-9]+$` told a generated client that such a value is valid, and it was answered 400.
    const loose: string[] = [];
    const walk = (node: unknown, at: string): void => {
      if (Array.isArray(node)) node.forEach((item, i) => walk(item, `${at}[${i}]`));
      else if (node !== null && typeof node === 'object')
        for (const [key, value] of Object.entries(node)) {
          if (key === 'pattern' && (value === '^[0-9]+$' || value === '^[0-9]*$')) loose.push(at);
          walk(value, `${at}.${key}`);
        }
    };
    walk(spec, '');
    expect(loose).toEqual([]);
  });

  it('references every shared response it defines', () => {
    const text = JSON.stringify(spec.paths);
    const unused = Object.keys(spec.components.responses).filter((name) => !text.includes(`"${ref(name)}"`));
    expect(unused).toEqual([]);
  });
});
