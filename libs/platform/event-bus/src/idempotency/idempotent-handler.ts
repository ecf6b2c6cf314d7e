import type { Pool, PoolClient } from 'pg';
import type { DataSource, EntityManager, MigrationInterface, QueryRunner } from 'typeorm';
import { applySqlMigrations, type SqlMigration } from '@stablepay/event-store';
import { insideTransaction } from '@stablepay/node-util';
import type { BusMessage } from '../event-bus.port';

/** What an idempotent handler did with a message: ran its effect, or recognised a redelivery and skipped it. */
export type IdempotentOutcome = 'applied' | 'skipped';

/** An effect run inside the transaction that also records the message as processed. */
export type PgEffect = (client: PoolClient, message: BusMessage) => Promise<void>;
export type EntityManagerEffect = (manager: EntityManager, message: BusMessage) => Promise<void>;

const CREATE_PROCESSED_MESSAGES = `
  CREATE TABLE IF NOT EXISTS processed_messages (
    consumer_group text        NOT NULL,
    message_id     text        NOT NULL,
    processed_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, message_id)
  )`;

const MARK_PROCESSED = `
  INSERT INTO processed_messages (consumer_group, message_id) VALUES ($1, $2)
  ON CONFLICT (consumer_group, message_id) DO NOTHING
  RETURNING message_id`;

export const PROCESSED_MESSAGES_MIGRATIONS: readonly SqlMigration[] = [
  { version: 1, name: 'processed messages', sql: CREATE_PROCESSED_MESSAGES },
];

/** Creates the `processed_messages` table where it does not exist (idempotent, safe from several processes). */
export async function migrateProcessedMessages(pool: Pool): Promise<number[]> {
  return applySqlMigrations(pool, 'processed_messages', PROCESSED_MESSAGES_MIGRATIONS);
}

/**
 * The same table as a TypeORM migration, for read-model databases whose schema TypeORM migrations own
 * (`CREATE TABLE IF NOT EXISTS`, so it coexists with migrateProcessedMessages on one database).
 */
export class CreateProcessedMessages1767225600000 implements MigrationInterface {
  name = 'CreateProcessedMessages1767225600000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(CREATE_PROCESSED_MESSAGES);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE IF EXISTS processed_messages');
  }
}

/**
 * Wraps an effect so that it and the "processed" mark of the message commit in ONE transaction: the mark is
 * inserted first, so a redelivered message finds it and is skipped, and an effect that fails rolls the mark
 * back, so the redelivery applies it. Two concurrent deliveries of one message are serialised by the mark's
 * primary key (the second waits for the first to commit, then skips).
 *
 * The effect must use the given client for every query: on PGlite, which serialises connections, a second
 * pooled connection would wait for this transaction forever.
 */
export function idempotentHandler(
  pool: Pool,
  group: string,
  effect: PgEffect,
): (message: BusMessage) => Promise<IdempotentOutcome> {
  return async (message) => {
    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      try {
        const marked = await client.query(MARK_PROCESSED, [group, message.id]);
        if (marked.rowCount === 0) {
          await client.query('ROLLBACK');
          return 'skipped';
        }
        await insideTransaction(() => effect(client, message));
        await client.query('COMMIT');
        return 'applied';
      } catch (error) {
        await client.query('ROLLBACK').catch((rollbackError: unknown) => {
          broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
        });
        throw error;
      }
    } finally {
      client.release(broken);
    }
  };
}

/** idempotentHandler for TypeORM read models: the effect gets the transaction's EntityManager. */
export function idempotentEntityManagerHandler(
  dataSource: DataSource,
  group: string,
  effect: EntityManagerEffect,
): (message: BusMessage) => Promise<IdempotentOutcome> {
  return (message) =>
    dataSource.transaction(async (manager): Promise<IdempotentOutcome> => {
      const marked = await manager.query<Array<{ message_id: string }>>(MARK_PROCESSED, [group, message.id]);
      if (marked.length === 0) return 'skipped';
      await effect(manager, message);
      return 'applied';
    });
}
