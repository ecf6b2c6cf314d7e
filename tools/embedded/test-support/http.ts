import { eventually } from '@stablepay/testing';
import type { EmbeddedStack } from '../embedded';

export type Json = Record<string, unknown>;
export interface ApiAnswer {
  readonly status: number;
  readonly body: Json;
}
export type Api = (method: string, path: string, body?: unknown, key?: string | null) => Promise<ApiAnswer>;

/**
 * The merchant API of an embedded stack over HTTP: `key` is the bearer API key (default the demo merchant's; null
 * sends none, for the public hosted routes).
 */
export function stackApi(stack: () => EmbeddedStack): Api {
  return async (method, path, body, key) => {
    const bearer = key === undefined ? stack().demoApiKey : key;
    const res = await fetch(`${stack().url}${path}`, {
      method,
      headers: {
        ...(bearer === null ? {} : { authorization: `Bearer ${bearer}` }),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : {}) as Json };
  };
}

/** Polls `read` every 100 ms until `done` holds (60 s at most); the failure names `what` and the last value. */
export const until = <T>(read: () => Promise<T>, done: (value: T) => boolean, what: string): Promise<T> =>
  eventually(read, done, what, { intervalMs: 100 });

/** Creates a merchant through the operator API (needs ADMIN_TOKEN in the stack's environment). */
export async function createMerchant(
  stack: EmbeddedStack,
  adminToken: string,
  name: string,
  settlementMode: 'crypto' | 'fiat' = 'crypto',
): Promise<{ id: string; apiKey: string }> {
  const res = await fetch(`${stack.url}/admin/merchants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name, mode: 'test', settlement_mode: settlementMode }),
  });
  const body = (await res.json()) as Json;
  if (res.status !== 201) throw new Error(`merchant not created: ${JSON.stringify(body)}`);
  return { id: String(body['id']), apiKey: String(body['api_key']) };
}
