import { DataSource } from 'typeorm';
import type { EmbeddedStack } from '../embedded';

/**
 * What a kill -9 after a keyed request's effect leaves of its Idempotency-Key: the claim still in flight under an
 * owner that no longer beats, made long enough ago for the client's retry to take it over and run the request again
 * (no kept answer to replay).
 */
export async function loseKeptAnswer(stack: EmbeddedStack, key: string): Promise<void> {
  const [, rows] = (await stack.service.app.get(DataSource).query(
    `UPDATE idempotency_keys SET state = 'in_flight', response_status = NULL, response_body = NULL,
       response_location = NULL, owner = 'killed-process', created_at = created_at - interval '1 hour'
     WHERE key = $1`,
    [key],
  )) as [unknown, number];
  if (rows !== 1) throw new Error(`no Idempotency-Key row ${key} to lose the answer of`);
}
