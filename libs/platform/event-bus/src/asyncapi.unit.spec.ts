import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { TOPIC_BY_CATEGORY } from './topics';

// docs/asyncapi.yaml is the public contract of the topics; topics.ts is what the code uses. Keep them in step.
const documentPath = join(__dirname, '..', '..', '..', '..', 'docs', 'asyncapi.yaml');
const document: unknown = parse(readFileSync(documentPath, 'utf8'));
// The webhook payloads refer to the API's objects there.
const openapi: unknown = parse(readFileSync(join(documentPath, '..', 'openapi.yaml'), 'utf8'));

function at(value: unknown, path: readonly string[]): unknown {
  let current = value;
  for (const part of path) {
    if (typeof current !== 'object' || current === null) return undefined;
    current = (current as Record<string, unknown>)[part];
  }
  return current;
}

function refsIn(value: unknown, found: string[] = []): string[] {
  if (Array.isArray(value)) value.forEach((v) => refsIn(v, found));
  else if (typeof value === 'object' && value !== null) {
    for (const [key, v] of Object.entries(value)) {
      if (key === '$ref' && typeof v === 'string') found.push(v);
      else refsIn(v, found);
    }
  }
  return found;
}

describe('docs/asyncapi.yaml', () => {
  it('is an AsyncAPI 3 document', () => {
    expect(at(document, ['asyncapi'])).toBe('3.0.0');
  });

  it('documents exactly the topics of topics.ts as channels (beside the merchant webhooks)', () => {
    const channels = Object.entries(at(document, ['channels']) as Record<string, unknown>)
      .filter(([name]) => name !== 'merchantWebhooks')
      .map(([, c]) => c);
    const addresses = channels.map((c) => at(c, ['address']));
    expect([...addresses].sort()).toEqual(Object.values(TOPIC_BY_CATEGORY).sort());
  });

  it('resolves every $ref, inside the document or into docs/openapi.yaml', () => {
    const unresolved = refsIn(document).filter((ref) => {
      if (ref.startsWith('openapi.yaml#/')) return at(openapi, ref.slice(14).split('/')) === undefined;
      if (!ref.startsWith('#/')) return true;
      return at(document, ref.slice(2).split('/')) === undefined;
    });
    expect(unresolved).toEqual([]);
  });

  it('describes every field of the envelope as required', () => {
    expect(at(document, ['components', 'schemas', 'Envelope', 'required'])).toEqual([
      'id',
      'topic',
      'key',
      'type',
      'data',
      'metadata',
      'revision',
      'recordedAt',
    ]);
  });
});
