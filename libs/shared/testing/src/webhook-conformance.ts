import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { workspaceRoot } from '@stablepay/node-util';
import { OpenApiConformance } from './openapi-conformance';

type Json = Record<string, unknown>;

/** The AsyncAPI channel that documents the webhook deliveries (docs/asyncapi.yaml). */
const CHANNEL = 'merchantWebhooks';

/**
 * Checks delivered webhook bodies against docs/asyncapi.yaml: the message of channel `merchantWebhooks` whose payload
 * names the body's `type` (in `properties.type`'s enum or const, at the top or in an `allOf`) must be there, and the
 * body must match its payload, objects the API documents included (`openapi.yaml#/components/schemas/...` refs,
 * read from docs/openapi.yaml), with no field that no schema on its path names: the same check as an API answer's.
 */
export class WebhookConformance {
  private readonly messages: Array<{ name: string; types: readonly string[]; payload: unknown }>;

  constructor(
    private readonly asyncapi: Json,
    private readonly openapi: OpenApiConformance,
  ) {
    const channel = (asyncapi['channels'] as Json | undefined)?.[CHANNEL] as Json | undefined;
    const messages = (channel?.['messages'] as Record<string, Json> | undefined) ?? {};
    this.messages = Object.entries(messages).map(([name, message]) => {
      const payload = this.inline(this.resolve(message)['payload']);
      return { name, types: typesOf(payload), payload };
    });
  }

  static fromFiles(dir = join(workspaceRoot, 'docs')): WebhookConformance {
    return new WebhookConformance(
      parse(readFileSync(join(dir, 'asyncapi.yaml'), 'utf8')) as Json,
      OpenApiConformance.fromFile(join(dir, 'openapi.yaml')),
    );
  }

  /** The webhook types the channel documents. */
  types(): string[] {
    return this.messages.flatMap((m) => m.types);
  }

  /** What is wrong with one delivered body (empty when it conforms). */
  check(delivery: unknown): string[] {
    const body = (delivery ?? {}) as Json;
    const type = String(body['type']);
    const name = `webhook ${type} ${String(body['id'])}`;
    const message = this.messages.find((m) => m.types.includes(type));
    if (!message)
      return [`${name}: no message of channel ${CHANNEL} in docs/asyncapi.yaml documents ${type}`];
    return this.openapi.checkValue(name, `asyncapi ${CHANNEL} ${message.name}`, message.payload, delivery);
  }

  /** Throws, listing every problem, unless the body conforms. */
  assert(delivery: unknown): void {
    const problems = this.check(delivery);
    if (problems.length > 0)
      throw new Error(`Webhook does not conform to AsyncAPI:\n- ${problems.join('\n- ')}`);
  }

  /** Follows a `$ref` inside the AsyncAPI document. */
  private resolve(value: Json): Json {
    const ref = value['$ref'];
    if (typeof ref !== 'string') return value;
    if (!ref.startsWith('#/')) throw new Error(`unsupported $ref ${ref} outside a schema`);
    let at: unknown = this.asyncapi;
    for (const part of ref.slice(2).split('/'))
      at = at && typeof at === 'object' ? (at as Json)[part] : undefined;
    if (!at || typeof at !== 'object') throw new Error(`unresolved ${ref}`);
    return this.resolve(at as Json);
  }

  /**
   * A payload schema with the AsyncAPI document's own `$ref`s replaced by what they name, and those into the
   * OpenAPI document made its local component refs (what OpenApiConformance reads).
   */
  private inline(value: unknown, path: readonly string[] = []): unknown {
    if (Array.isArray(value)) return value.map((v) => this.inline(v, path));
    if (!value || typeof value !== 'object') return value;
    const ref = (value as Json)['$ref'];
    if (typeof ref === 'string') {
      const external = /^(?:\.\/)?openapi\.yaml(#\/components\/schemas\/.+)$/.exec(ref);
      if (external?.[1]) return { ...(value as Json), $ref: external[1] };
      if (path.includes(ref)) throw new Error(`recursive ${ref} is not supported`);
      const { $ref: _, ...siblings } = value as Json;
      return { ...(this.inline(this.resolve({ $ref: ref }), [...path, ref]) as Json), ...siblings };
    }
    return Object.fromEntries(Object.entries(value as Json).map(([k, v]) => [k, this.inline(v, path)]));
  }
}

/** The `type` values a payload admits: `properties.type`'s enum or const, at its top or in its allOf. */
function typesOf(payload: unknown): string[] {
  const schema = (payload ?? {}) as Json;
  const own = ((schema['properties'] as Json | undefined)?.['type'] ?? {}) as Json;
  const values = [
    ...((own['enum'] as unknown[] | undefined) ?? []),
    ...('const' in own ? [own['const']] : []),
  ];
  return [
    ...values.filter((v): v is string => typeof v === 'string'),
    ...((schema['allOf'] as unknown[] | undefined) ?? []).flatMap(typesOf),
  ];
}
