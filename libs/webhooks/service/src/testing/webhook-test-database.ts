import { createTestDatabase, type TestDatabase } from '@stablepay/testing';

/** The dispatcher's tests use the platform's throwaway database (real PostgreSQL, or a private PGlite). */
export function createWebhookTestDatabase(): Promise<TestDatabase> {
  return createTestDatabase();
}
