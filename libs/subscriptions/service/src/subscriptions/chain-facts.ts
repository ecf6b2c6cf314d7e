import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { formatCaip19 } from '@stablepay/evm';
import { EVENT_STORE } from '@stablepay/aggregate';
import { type EventStore, PostgresEventStore } from '@stablepay/event-store';
import {
  type ChargeObservation,
  type ChargeWritePath,
  type RetractableFact,
  type SubscriptionChargeSucceededData,
  type SubscriptionCommand,
  type SubscriptionCreatedData,
  subscriptionStreamId,
} from '@stablepay/subscriptions-domain';
import { DomainError } from '@stablepay/util';
import { SUBSCRIPTIONS_CONFIG, type SubscriptionsConfig } from '../subscriptions.config';
import { SubscriptionCheckoutCommands } from '../subscription-checkouts/subscription-checkout.commands';
import type { SubscriptionCheckoutRow } from '../subscription-checkouts/subscription-checkout.reader';
import { SubscriptionCommands } from './subscription.commands';
import { SubscriptionManagerCommands } from './subscription-manager.commands';
import { type ManagerRow, SubscriptionManagers } from './subscription-managers';

/** One decoded SubscriptionManager log, from the indexer's observation or from a receipt the service read itself. */
export interface ManagerLog {
  readonly chain: string;
  readonly contract: string;
  readonly event: string;
  /** Decoded arguments as strings (uints decimal, addresses checksummed, bytes32 lower-case hex). */
  readonly args: Readonly<Record<string, string>>;
  readonly txHash: string;
  readonly blockNumber: string;
  /** The block's hash (what tells a reorg apart); absent where the writer did not read it. */
  readonly blockHash?: string;
  /** ISO block time. */
  readonly blockTime: string;
}

/** The row id of a receipt log the API path read: one per log and block, whichever writer remembers it. */
export function receiptObservationId(
  log: Pick<ManagerLog, 'chain' | 'txHash'> & { readonly blockHash: string },
  logIndex: number,
): string {
  return `receipt:${log.chain}:${log.txHash.toLowerCase()}:${logIndex}:${log.blockHash.toLowerCase()}`;
}

/** A manager observation as remembered for its possible retraction. */
export interface ObservedManagerLog {
  readonly observation_id: string;
  readonly chain: string;
  readonly contract: string;
  readonly event: string;
  readonly subscription_id: string | null;
  readonly tx_hash: string;
  readonly args: Readonly<Record<string, string>>;
  readonly retracted_at: string | null;
  readonly block_number: string | null;
  readonly block_hash: string | null;
  readonly written_by: 'indexer' | 'api';
  readonly remembered_at: Date;
  /** API-path receipts: since when its block is replaced and the node holds the transaction pending (else null). */
  readonly pending_since?: Date | string | null;
}

/** `subscription_chain_observations`: what each manager observation reported, to undo it on its retraction. */
@Injectable()
export class ChainObservationLog {
  /**
   * The receipt's row may commit without waiting for its WAL flush: the fact's append that follows, on the same
   * database (the platform opens the Postgres event store on the read models' one), commits later in the same WAL
   * and waits for its flush, so a recorded fact implies a durable row, and a row lost with the fact unrecorded
   * leaves nothing to check. Not with another store (EventStoreDB): its append flushes nothing here.
   */
  private readonly receiptCommitsWithTheFact: boolean;

  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Optional() @Inject(EVENT_STORE) store?: EventStore,
  ) {
    this.receiptCommitsWithTheFact = store instanceof PostgresEventStore;
  }

  async remember(
    observationId: string,
    log: ManagerLog,
    writtenBy: 'indexer' | 'api' = 'indexer',
    flushedByTheFact = false,
  ): Promise<void> {
    const insert = `INSERT INTO subscription_chain_observations
         (observation_id, chain, contract, event, subscription_id, tx_hash, args, block_number, block_hash, written_by)
       VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10) ON CONFLICT (observation_id) DO NOTHING`;
    await this.dataSource.query(
      // set_config(..., true) lasts until the statement's own commit: the session is unchanged.
      flushedByTheFact
        ? `WITH remembered AS (${insert} RETURNING 1) SELECT set_config('synchronous_commit', 'off', true)`
        : insert,
      [
        observationId,
        log.chain,
        log.contract,
        log.event,
        log.args['subscriptionId']?.toLowerCase() ?? null,
        log.txHash,
        JSON.stringify(log.args),
        log.blockNumber,
        log.blockHash?.toLowerCase() ?? null,
        writtenBy,
      ],
    );
  }

  /**
   * A log the API path read from a receipt, kept until the indexer reports the same transaction from the same block
   * (the indexer's retraction then covers it) or the block is found orphaned first (SubscriptionReceiptChecks).
   * Written before the fact is recorded, as the indexer's observations are (the subscribe report: its facts do not
   * carry the receipt's block).
   */
  async rememberReceipt(log: ManagerLog & { readonly blockHash: string }, logIndex: number): Promise<void> {
    // On the subscribe report's answer path: the commit's flush wait was most of this statement's time (a WAL fsync).
    await this.remember(receiptObservationId(log, logIndex), log, 'api', this.receiptCommitsWithTheFact);
  }

  /**
   * The row of a receipt log a recorded fact names (the charge call keeps its receipt's block on the fact, and
   * ChargeReceiptsConsumer writes the row from it): the fact is durable already, so nothing rests on this commit's
   * order, and it waits for its own flush.
   */
  async rememberRecordedReceipt(
    log: ManagerLog & { readonly blockHash: string },
    logIndex: number,
  ): Promise<void> {
    await this.remember(receiptObservationId(log, logIndex), log, 'api');
  }

  /** API-path receipts not yet handed over to the indexer nor retracted, oldest first, after `after`. */
  async openReceipts(
    limit: number,
    after?: { readonly at: Date; readonly id: string },
  ): Promise<ObservedManagerLog[]> {
    return this.dataSource.query(
      `SELECT * FROM subscription_chain_observations
        WHERE written_by = 'api' AND settled_at IS NULL AND retracted_at IS NULL
          AND ($1::timestamptz IS NULL OR (remembered_at, observation_id) > ($1::timestamptz, $2::text))
        ORDER BY remembered_at, observation_id LIMIT $3`,
      [after?.at.toISOString() ?? null, after?.id ?? '', limit],
    );
  }

  /** Whether the indexer reported a log of `txHash` from the block `blockHash` (retracted since or not). */
  async indexerSaw(txHash: string, blockHash: string): Promise<boolean> {
    const rows: unknown[] = await this.dataSource.query(
      `SELECT 1 FROM subscription_chain_observations
        WHERE lower(tx_hash) = lower($1) AND block_hash = lower($2) AND written_by = 'indexer' LIMIT 1`,
      [txHash, blockHash],
    );
    return rows.length > 0;
  }

  /**
   * Settles, in one statement, every open API-path receipt whose transaction the indexer reported from the same block
   * (from then on the indexer's retraction covers it); how many. A lookup per open receipt each pass cost two queries
   * a second for every charge of the last INDEXER_CONFIRMATIONS blocks.
   */
  async settleSeenByIndexer(): Promise<number> {
    const rows: unknown[] = await this.dataSource.query(
      `UPDATE subscription_chain_observations r SET settled_at = now()
        WHERE r.written_by = 'api' AND r.settled_at IS NULL AND r.retracted_at IS NULL AND r.block_hash IS NOT NULL
          AND EXISTS (SELECT 1 FROM subscription_chain_observations i
                       WHERE lower(i.tx_hash) = lower(r.tx_hash) AND i.block_hash = r.block_hash
                         AND i.written_by = 'indexer')
        RETURNING r.observation_id`,
    );
    // TypeORM answers an UPDATE ... RETURNING as [rows, count] on PostgreSQL.
    const returned = Array.isArray(rows[0]) ? (rows[0] as unknown[]) : rows;
    return returned.length;
  }

  async markSettled(observationId: string): Promise<void> {
    await this.dataSource.query(
      'UPDATE subscription_chain_observations SET settled_at = now() WHERE observation_id = $1',
      [observationId],
    );
  }

  /**
   * The receipt's transaction was mined again in another block of the new fork: the row follows it there and stays
   * open, so the indexer's observation from that block settles it, and a reorg of that block too is checked.
   */
  async followReceipt(observationId: string, blockNumber: number, blockHash: string): Promise<void> {
    await this.dataSource.query(
      `UPDATE subscription_chain_observations SET block_number = $2, block_hash = lower($3), pending_since = NULL
        WHERE observation_id = $1`,
      [observationId, blockNumber, blockHash],
    );
  }

  /** The receipt's block is gone and its transaction pending since `at` (the first pass that found it so). */
  async markPending(observationId: string, at: Date): Promise<void> {
    await this.dataSource.query(
      `UPDATE subscription_chain_observations SET pending_since = COALESCE(pending_since, $2::timestamptz)
        WHERE observation_id = $1`,
      [observationId, at.toISOString()],
    );
  }

  async find(observationId: string): Promise<ObservedManagerLog | undefined> {
    const rows: ObservedManagerLog[] = await this.dataSource.query(
      'SELECT * FROM subscription_chain_observations WHERE observation_id = $1',
      [observationId],
    );
    return rows[0];
  }

  async markRetracted(observationId: string): Promise<void> {
    await this.dataSource.query(
      'UPDATE subscription_chain_observations SET retracted_at = now() WHERE observation_id = $1',
      [observationId],
    );
  }
}

/** The non-charge facts a reorg can undo, by the manager event that reported them. */
const RETRACTABLE_FACT: Readonly<Record<string, RetractableFact>> = {
  SubscriptionCreated: 'created',
  SubscriptionCancelled: 'cancelled',
  CapUpdated: 'cap_updated',
  BudgetUpdated: 'budget_updated',
  SubscriptionMigrated: 'migrated',
  MigrationProposed: 'migration_proposed',
  MigrationVoided: 'migration_voided',
};

const isoOf = (unixSeconds: string) => new Date(Number(unixSeconds) * 1000).toISOString();

/**
 * Chain facts of a merchant's SubscriptionManager -> commands of the Subscription aggregate, for both write paths:
 * the indexer's observations (`writtenBy` indexer) and the subscribe call's receipt (`api`). The aggregate records a
 * fact once whichever path reports it first. When a subscription and its first charge (nonce 0) are recorded, its
 * intent completes (once; late after a cancel or expiry: on-chain truth wins).
 */
@Injectable()
export class SubscriptionChainFacts {
  private readonly logger = new Logger('subscription-chain-facts');

  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(SUBSCRIPTIONS_CONFIG) private readonly config: SubscriptionsConfig,
    @Inject(SubscriptionManagers) private readonly managers: SubscriptionManagers,
    @Inject(SubscriptionCommands) private readonly commands: SubscriptionCommands,
    @Inject(SubscriptionManagerCommands) private readonly managerFacts: SubscriptionManagerCommands,
    @Inject(SubscriptionCheckoutCommands) private readonly checkouts: SubscriptionCheckoutCommands,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {}

  async checkoutByOnchainId(onchainId: string): Promise<SubscriptionCheckoutRow | undefined> {
    const rows: SubscriptionCheckoutRow[] = await this.dataSource.query(
      `SELECT * FROM subscription_checkouts WHERE lower(object->>'onchain_id') = $1`,
      [onchainId.toLowerCase()],
    );
    return rows[0];
  }

  /**
   * Records one log. `key` makes the append idempotent across redeliveries (the observation id, or the receipt's
   * transaction and log index). Returns the subscription stream's revision after it, null when the log is not one of ours (unknown manager or
   * intent) or was refused.
   */
  async record(log: ManagerLog, writtenBy: ChargeWritePath, key: string): Promise<number | null> {
    const manager = await this.managers.findByAddress(log.chain, log.contract);
    if (!manager) {
      this.logger.warn({
        msg: 'log of an unknown subscription manager skipped',
        chain: log.chain,
        contract: log.contract,
      });
      return null;
    }
    const a = log.args;
    const owner = { merchantId: manager.merchant_id, mode: manager.mode };
    if (log.event === 'Paused' || log.event === 'Unpaused') {
      // The manager's incident brake: a fact of the manager, not of any one subscription.
      await this.managerFacts.run(
        log.chain,
        manager.address,
        owner,
        {
          type: 'RecordManagerPauseChange',
          paused: log.event === 'Paused',
          role: a['role'] ?? '',
          account: a['account'] ?? '',
          txHash: log.txHash,
          at: log.blockTime,
        },
        key,
      );
      return null;
    }
    const subscriptionId = (a['subscriptionId'] ?? '').toLowerCase();
    if (!subscriptionId) return null;
    const run = async (command: SubscriptionCommand): Promise<number | null> => {
      try {
        return (await this.commands.run(subscriptionId, owner, command, key)).revision;
      } catch (error) {
        // A fact the aggregate refuses (a second transaction for a nonce, a fact of a subscription it never saw
        // created) is refused on every redelivery: reported, never retried for ever.
        if (error instanceof DomainError) {
          this.logger.error({
            msg: 'chain fact refused',
            subscriptionId,
            event: log.event,
            code: error.code,
            key,
          });
          return null;
        }
        throw error;
      }
    };
    switch (log.event) {
      case 'SubscriptionCreated': {
        const checkout = await this.checkoutByOnchainId(subscriptionId);
        if (!checkout || checkout.merchant_id !== manager.merchant_id) {
          this.logger.warn({
            msg: 'SubscriptionCreated without an intent of this merchant skipped',
            subscriptionId,
          });
          return null;
        }
        const token = this.config.chains[manager.mode].findStablecoin(log.chain, a['token'] ?? '');
        const chainId = BigInt(log.chain.slice('eip155:'.length));
        return run({
          type: 'RecordSubscriptionCreated',
          subscription: {
            subscriptionId,
            checkoutId: checkout.id,
            subscriber: a['subscriber'] ?? '',
            externalCustomerId: checkout.object.external_customer_id,
            chain: log.chain,
            asset: formatCaip19(chainId, a['token'] ?? ''),
            tokenSymbol: token?.symbol ?? 'UNKNOWN',
            tokenDecimals: token?.decimals ?? 0,
            cap: a['cap'] ?? '0',
            budget: a['budget'] ?? '0',
            price: checkout.object.price,
            priceCurrency: checkout.object.price_currency,
            periodDuration: Number(a['periodDuration']),
            startedAt: a['startedAt'] ?? '0',
            txHash: log.txHash,
            createdAt: log.blockTime,
          },
          firstCharge: null,
          writtenBy,
        });
      }
      case 'SubscriptionCharged': {
        const charge = chargeObservation(log);
        let revision = await run({ type: 'RecordChargeSucceeded', charge, writtenBy });
        if (revision === null) return null;
        // On-chain truth: the charge stands wherever it paid. A payee other than the settlement address the settings
        // held at the charge's block time is the one the merchant had replaced, still in the registry (a subscribe
        // authorized before POST /settings and sent after it): the merchant is told, whichever write path records
        // the log first. The address is the one in force then (the settings' history), not the one held when the
        // log is read: A -> B -> C before a late read still names B for a charge that paid A between the changes.
        // The aggregate compares the times (a change in the block's own second is no replacement): this runs again
        // for every later sighting of the log.
        // The address that replaced it next is no replaced one either when the block is close to that change: the
        // block's clock may not have reached it when the registry update and the charge paying it were mined.
        const paidTo = a['payee'] ?? '';
        const settlement = paidTo
          ? await this.managers.replacedSettlementAddressPaid(manager.merchant_id, charge.chargedAt, paidTo)
          : null;
        if (settlement)
          revision = await this.commands
            .run(
              subscriptionId,
              owner,
              {
                type: 'RecordChargePaidReplacedSettlement',
                nonce: charge.nonce,
                txHash: charge.txHash,
                paidTo,
                settlementAddress: settlement.address,
                settlementChangedAt: settlement.changedAt,
                now: this.commands.now(),
              },
              `${key}:replaced-settlement`,
            )
            .then((r) => r.revision);
        if (charge.nonce === 0) await this.completeCheckout(manager, subscriptionId, log, key);
        return revision;
      }
      case 'SubscriptionCancelled':
        return run({
          type: 'RecordCancelled',
          by: a['cancelledBy'] === '0' ? 'merchant' : 'subscriber',
          txHash: log.txHash,
          cancelledAt: isoOf(a['timestamp'] ?? '0'),
        });
      case 'CapUpdated':
        return run({
          type: 'RecordCapUpdated',
          oldCap: a['oldCap'] ?? '0',
          newCap: a['newCap'] ?? '0',
          txHash: log.txHash,
          updatedAt: isoOf(a['timestamp'] ?? '0'),
        });
      case 'BudgetUpdated':
        return run({
          type: 'RecordBudgetUpdated',
          oldBudget: a['oldBudget'] ?? '0',
          newBudget: a['newBudget'] ?? '0',
          windowIndex: a['windowIndex'] ?? '0',
          windowSpent: a['windowSpent'] ?? '0',
          txHash: log.txHash,
          updatedAt: isoOf(a['timestamp'] ?? '0'),
        });
      case 'SubscriptionMigrated':
        return run({
          type: 'RecordMigrated',
          oldSubscriber: a['oldSubscriber'] ?? '',
          newSubscriber: a['newSubscriber'] ?? '',
          newSubscriberBalance: a['newSubscriberBalance'] ?? '0',
          newSubscriberAllowance: a['newSubscriberAllowance'] ?? '0',
          txHash: log.txHash,
          migratedAt: isoOf(a['timestamp'] ?? '0'),
        });
      case 'MigrationProposed':
      case 'MigrationVoided':
        return run({
          type: log.event === 'MigrationProposed' ? 'RecordMigrationProposed' : 'RecordMigrationVoided',
          proposedSubscriber: a['proposedSubscriber'] ?? '',
          txHash: log.txHash,
          at: log.blockTime,
        });
      default:
        return null;
    }
  }

  /**
   * Undoes the fact a retracted observation reported (docs/subscriptions.md, Reorgs): the aggregate records the
   * retraction as a fact of its own, and only when it still holds that fact with that transaction.
   */
  async retract(observed: ObservedManagerLog, key: string): Promise<void> {
    const manager = await this.managers.findByAddress(observed.chain, observed.contract);
    if (!manager) return;
    const now = this.commands.now();
    if (observed.event === 'Paused' || observed.event === 'Unpaused') {
      await this.managerFacts.run(
        observed.chain,
        manager.address,
        { merchantId: manager.merchant_id, mode: manager.mode },
        { type: 'RetractManagerPauseChange', txHash: observed.tx_hash, now },
        key,
      );
      return;
    }
    const subscriptionId = observed.subscription_id;
    if (!subscriptionId) return;
    let command: SubscriptionCommand;
    if (observed.event === 'SubscriptionCharged')
      command = {
        type: 'RetractCharge',
        nonce: Number(observed.args['nonce']),
        txHash: observed.tx_hash,
        now,
      };
    else {
      const fact = RETRACTABLE_FACT[observed.event];
      if (!fact) return;
      command = { type: 'RetractFact', fact, txHash: observed.tx_hash, now };
    }
    try {
      await this.commands.run(
        subscriptionId,
        { merchantId: manager.merchant_id, mode: manager.mode },
        command,
        key,
      );
      // The subscribe transaction is gone: so is the completion of its intent (docs/subscription-checkouts.md, Reorgs).
      if (observed.event === 'SubscriptionCreated') {
        const checkout = await this.checkoutByOnchainId(subscriptionId);
        if (checkout && checkout.merchant_id === manager.merchant_id)
          await this.checkouts.retractCompletion(checkout, observed.tx_hash, key);
      }
    } catch (error) {
      if (error instanceof DomainError) {
        this.logger.error({
          msg: 'retraction refused',
          subscriptionId,
          event: observed.event,
          code: error.code,
          key,
        });
        return;
      }
      throw error;
    }
  }

  /**
   * The intent of a subscription whose first charge is recorded completes (completed fires once per subscribe that
   * stands on chain: again only after a reorg undid the completion and the transaction is re-included).
   */
  private async completeCheckout(
    manager: ManagerRow,
    subscriptionId: string,
    log: ManagerLog,
    key: string,
  ): Promise<void> {
    const checkout = await this.checkoutByOnchainId(subscriptionId);
    if (!checkout || checkout.merchant_id !== manager.merchant_id) return;
    const chainId = BigInt(log.chain.slice('eip155:'.length));
    // The facts the completion rests on, as the Subscription aggregate recorded them (data.subscription and
    // data.first_charge of subscription_checkout.completed are projected from them); the latest, which is the one
    // on chain when a reorg took an earlier recording out.
    const events = (await this.store.readStream(subscriptionStreamId(subscriptionId))).reverse();
    const created = events.find((e) => e.type === 'SubscriptionCreated.v1')?.data as
      SubscriptionCreatedData | undefined;
    const firstCharge = events.find(
      (e) =>
        e.type === 'SubscriptionChargeSucceeded.v1' &&
        (e.data as SubscriptionChargeSucceededData).nonce === 0,
    )?.data as SubscriptionChargeSucceededData | undefined;
    await this.checkouts.complete(
      checkout,
      {
        subscriber: log.args['subscriber'] ?? '',
        chain: log.chain,
        asset: formatCaip19(chainId, log.args['token'] ?? ''),
        txHash: log.txHash,
        subscription: created ?? null,
        firstCharge: firstCharge ?? null,
      },
      key,
    );
  }
}

export function chargeObservation(log: ManagerLog): ChargeObservation {
  const a = log.args;
  const amount = BigInt(a['amount'] ?? '0');
  const received = BigInt(a['received'] ?? a['amount'] ?? '0');
  return {
    nonce: Number(a['nonce']),
    amount: amount.toString(),
    // What the payee did not receive of the amount (a fee-on-transfer token's cut); 0 for the accepted stablecoins.
    fee: (amount > received ? amount - received : 0n).toString(),
    txHash: log.txHash,
    blockNumber: log.blockNumber,
    chargedAt: log.blockTime,
    windowIndex: a['windowIndex'] ?? '0',
    windowSpent: a['windowSpent'] ?? '0',
    quoteHash: a['quoteHash'] ?? '0x'.padEnd(66, '0'),
  };
}
