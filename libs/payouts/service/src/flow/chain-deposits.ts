import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  Optional,
} from '@nestjs/common';
import { IndexerWatchClient } from '@stablepay/chain-operator';
import {
  type BusMessage,
  type BusSubscription,
  chainObservationIsolationKey,
  EVENT_BUS,
  type EventBus,
} from '@stablepay/event-bus';
import { EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import { type DepositAddress, payoutStreamId } from '@stablepay/payouts-domain';
import { DomainError } from '@stablepay/util';
import { PayoutsAggregates } from '../aggregates';
import { payoutTokens } from '../offering';
import { type PayoutChains, PAYOUTS_CONFIG, type PayoutsConfig } from '../payouts.config';
import { CUSTOMER_TOPIC, foldPayout } from '../read-model/objects';
import { PayoutsReader } from '../read-model/payouts.reader';
import { DepositIntake } from './deposit-intake';
import { flagRetractedAfterSweep, retractedAfterForward } from './retracted-after-sweep';

export const PAYOUTS_CHAINS = Symbol('PAYOUTS_CHAINS');
export const PAYOUT_DEPOSIT_WATCH_GROUP = 'payouts.deposit-watch';
export const PAYOUT_DEPOSIT_OBSERVATION_GROUP = 'payouts.deposit-observations';
const CHAIN_TOPIC = 'indexer.chain-observation.v1';

interface Retraction {
  readonly chain: string;
  readonly observationType: string;
  readonly txHash: string;
  readonly logIndex: number;
  /** The orphaned block (absent in retractions published before it was carried). */
  readonly blockHash?: string;
}

interface Erc20Transfer {
  readonly chain: string;
  readonly blockHash?: string;
  readonly txHash: string;
  readonly logIndex: number;
  /** CAIP-19 of the token. */
  readonly asset: string;
  readonly from: string;
  readonly to: string;
  readonly amount: string;
}

/**
 * Customers' deposits on chain (docs/payouts.md, "Deposits"), like the payments scope's (docs/payment-deposits.md):
 * - watch: each created customer's deposit address is watched by the indexer on every configured chain that funds
 *   payouts (`indexer.watch.address`; idempotent);
 * - observe: each `Erc20TransferObserved.v1` to a customer's address (the indexer publishes it once the block has the
 *   chain's confirmation depth) of a payout token goes to the DepositIntake (key: chain, transaction, log index, so
 *   a redelivery appends nothing). Other tokens are left where they are.
 * Only where the chain layer configures payouts (`PAYOUT_OFF_RAMP_ADDRESS` with chains): the addresses are then the
 * CREATE2 PayoutDeposit clones, whose funds only the operator's sweep to the off-ramp can move.
 */
@Injectable()
export class PayoutChainDeposits implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('payouts.chain-deposits');
  private readonly subscriptions: BusSubscription[] = [];

  constructor(
    @Inject(EVENT_BUS) private readonly bus: EventBus,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(PayoutsReader) private readonly reader: PayoutsReader,
    @Inject(DepositIntake) private readonly intake: DepositIntake,
    @Inject(PayoutsAggregates) private readonly aggregates: PayoutsAggregates,
    @Inject(IndexerWatchClient) private readonly watches: IndexerWatchClient,
    @Inject(PAYOUTS_CONFIG) private readonly config: PayoutsConfig,
    @Optional() @Inject(PAYOUTS_CHAINS) private readonly chains?: PayoutChains,
  ) {}

  private get active(): boolean {
    return this.chains?.enabled === true && this.chains.payouts !== null;
  }

  async onApplicationBootstrap(): Promise<void> {
    if (!this.active) return;
    // A series that starts at 0 lets the alert take increase(): one that appears at its first retraction, at 1, would
    // be missed by increase() and could only be alerted on as `> 0`, firing until the process restarts.
    for (const chain of this.chains?.chains ?? []) retractedAfterForward().inc({ chain: chain.caip2 }, 0);
    const onError = (what: string) => (error: unknown, message: BusMessage) =>
      this.logger.error({ msg: `${what} failed, will retry`, messageId: message.id, error: String(error) });
    this.subscriptions.push(
      await this.bus.consume({
        group: PAYOUT_DEPOSIT_WATCH_GROUP,
        topics: [CUSTOMER_TOPIC],
        handler: (message) => this.watch(message),
        onError: onError('watching a customer deposit address'),
      }),
      await this.bus.consume({
        group: PAYOUT_DEPOSIT_OBSERVATION_GROUP,
        topics: [CHAIN_TOPIC],
        isolationKey: chainObservationIsolationKey,
        handler: (message) => this.observe(message),
        onError: onError('a customer deposit observation'),
      }),
    );
  }

  async beforeApplicationShutdown(): Promise<void> {
    for (const s of this.subscriptions.splice(0)) await s.stop();
  }

  async caughtUp(): Promise<void> {
    for (const s of this.subscriptions) await s.caughtUp();
  }

  private async watch(message: BusMessage): Promise<void> {
    if (message.type !== 'CustomerCreated.v1') return;
    const mode = message.metadata.mode;
    if (mode !== 'test' && mode !== 'live') throw new Error(`event ${message.id} has no mode metadata`);
    const data = message.data as { depositAddresses: DepositAddress[] };
    const funding = new Set(payoutTokens(this.config, mode).map((t) => t.chain));
    const chains = (this.chains?.chains ?? []).filter((c) => funding.has(c.caip2));
    for (const { address } of data.depositAddresses)
      for (const chain of chains) await this.watches.watchAddress({ chain: chain.caip2, address });
  }

  /**
   * A reorg orphaned the block of a deposit (docs/payouts.md, "Reorgs"): a payout not swept yet waits for a
   * deposit again (PayoutDepositRetracted.v1); a swept or forwarded one cannot be undone here (the funds left the
   * address): it is logged as an error and counted for the operator, and its sweep, orphaned with the deposit, is
   * recorded as such (PayoutSweepOrphaned.v1) for the flow to find or redo on the new fork.
   *
   * The payouts are found by the deposit's claim, written before its fact (the read model may not have projected
   * the deposit yet: the retraction would find nothing and the payout would be swept with a deposit that no longer
   * exists), and by the read model for deposits claimed before claims were kept. Each is read from its stream.
   */
  private async retract(message: BusMessage): Promise<void> {
    const r = message.data as Retraction;
    if (r.observationType !== 'Erc20TransferObserved.v1') return;
    const ids = new Set(await this.intake.claimedBy(r));
    for (const row of await this.reader.payoutsFundedBy(r.chain, r.txHash)) ids.add(row.id);
    for (const id of ids) {
      const history = await this.store.readStream(payoutStreamId(id));
      const merchantId = history[0]?.metadata.merchantId;
      const mode = history[0]?.metadata.mode;
      if (merchantId === undefined || mode === undefined) continue;
      const payout = foldPayout(history);
      const txHash = payout.deposit?.txHash;
      try {
        await this.aggregates.payout(
          id,
          { merchantId, mode },
          {
            type: 'RetractDeposit',
            // The stored spelling (the decider compares exactly; the indexer's and the fact's may differ in case).
            txHash: txHash?.toLowerCase() === r.txHash.toLowerCase() ? txHash : r.txHash,
            now: this.aggregates.now(),
          },
          `retract:${message.id}`,
        );
      } catch (error) {
        if (!(error instanceof DomainError && error.code === 'deposit_already_forwarded')) throw error;
        flagRetractedAfterSweep(this.logger, {
          payout: id,
          status: payout.status,
          chain: r.chain,
          txHash: r.txHash,
          logIndex: r.logIndex,
        });
        // The sweep came after the deposit, so the reorg orphaned it too: the flow looks for it on the new fork, or
        // redoes it once the same transfer is observed there again (the intake, "Reorgs").
        if (payout.sweepTxHash !== null)
          await this.aggregates.payout(
            id,
            { merchantId, mode },
            { type: 'RecordSweepOrphaned', txHash: payout.sweepTxHash, now: this.aggregates.now() },
            `orphaned:${message.id}`,
          );
      }
    }
  }

  private async observe(message: BusMessage): Promise<void> {
    if (message.type === 'ObservationRetracted.v1') return this.retract(message);
    if (message.type !== 'Erc20TransferObserved.v1') return;
    const t = message.data as Erc20Transfer;
    const customer = await this.reader.customerByDepositAddress(t.to);
    if (!customer) return;
    const token = payoutTokens(this.config, customer.mode).find(
      (k) => k.chain === t.chain && k.asset.toLowerCase() === t.asset.toLowerCase(),
    );
    if (!token) {
      this.logger.warn({
        msg: 'a customer deposit of a token payouts do not take',
        customer: customer.id,
        ...t,
      });
      return;
    }
    await this.intake.record(customer, {
      chain: t.chain,
      token: token.symbol,
      amount: t.amount,
      from: t.from,
      txHash: t.txHash,
      logIndex: t.logIndex,
      ...(t.blockHash ? { blockHash: t.blockHash } : {}),
    });
  }
}
