import { Client } from 'pg';

/** A positive number from the environment, or the fallback. */
export const num = (name: string, fallback: number): number => {
  const raw = process.env[name];
  const value = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number`);
  return value;
};

export const percentile = (values: readonly number[], p: number): number => {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
};

/** The floor's row: one jsonb body about the size of a create's input. */
export const FLOOR_INSERT = 'INSERT INTO bench_floor (body) VALUES ($1::jsonb)';
export const FLOOR_BODY = JSON.stringify({
  price: '1000',
  price_currency: 'USD',
  metadata: { order: 'o-1' },
});

/** Creates the floor's table and opens `count` connections for it. */
export async function openFloorClients(url: string, count: number): Promise<Client[]> {
  const setup = new Client({ connectionString: url });
  await setup.connect();
  await setup.query('CREATE TABLE IF NOT EXISTS bench_floor (id bigserial PRIMARY KEY, body jsonb NOT NULL)');
  await setup.end();
  return Promise.all(
    Array.from({ length: count }, async () => {
      const c = new Client({ connectionString: url });
      await c.connect();
      return c;
    }),
  );
}
