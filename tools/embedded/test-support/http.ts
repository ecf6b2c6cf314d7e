import { eventually, OpenApiConformance } from '@stablepay/testing';
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

export type AdminPost = (
  path: string,
  body?: unknown,
  options?: { readonly token?: string; readonly idempotencyKey?: string },
) => Promise<ApiAnswer>;

/**
 * POST to an operator route (`/admin<path>`) with `adminToken` (or `options.token`), asserting every answer, success
 * or refusal, is the one docs/openapi.yaml documents.
 */
export function adminPost(stack: () => EmbeddedStack, adminToken: string): AdminPost {
  const openapi = OpenApiConformance.fromFile();
  return async (path, body, options = {}) => {
    const res = await fetch(`${stack().url}/admin${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${options.token ?? adminToken}`,
        'content-type': 'application/json',
        ...(options.idempotencyKey ? { 'idempotency-key': options.idempotencyKey } : {}),
      },
      body: JSON.stringify(body ?? {}),
    });
    const answer = { status: res.status, body: (await res.json()) as Json };
    openapi.assert({
      method: 'POST',
      path: `/admin${path}`,
      ...answer,
      contentType: res.headers.get('content-type'),
    });
    return answer;
  };
}

/** Each [route, body, status, error fields] answers that status and an error envelope with those fields. */
export async function expectRefusals(
  post: AdminPost,
  refusals: ReadonlyArray<readonly [string, unknown, number, Json]>,
): Promise<void> {
  for (const [route, body, status, error] of refusals) {
    const res = await post(route, body);
    expect({ route, body, status: res.status, error: res.body['error'] }).toEqual({
      route,
      body,
      status,
      error: expect.objectContaining(error),
    });
  }
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
