import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  Optional,
} from '@nestjs/common';
import {
  type DepositRescanAnswer,
  type DepositRescanCommand,
  IndexerWatchClient,
  OperatorRelayers,
  rescanDeposits,
} from '@stablepay/chain-operator';
import {
  type BusMessage,
  type BusSubscription,
  chainObservationIsolationKey,
  EVENT_BUS,
  type EventBus,
} from '@stablepay/event-bus';
import { blockMinedBefore } from '@stablepay/evm';
import { EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import { customerStreamId, type DepositAddress, payoutStreamId } from '@stablepay/payouts-domain';
import { DomainError, notFound } from '@stablepay/util';
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
    @Optional() @Inject(OperatorRelayers) private readonly relayers?: OperatorRelayers,
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

  /** The chains a customer's deposit addresses are watched on: those of the mode's payout tokens this deployment follows. */
  private watchedChains(mode: 'test' | 'live'): string[] {
    const funding = new Set(payoutTokens(this.config, mode).map((t) => t.chain));
    return (this.chains?.chains ?? []).filter((c) => funding.has(c.caip2)).map((c) => c.caip2);
  }

  /**
   * An operator's re-scan of a customer's deposit addresses (docs/chain-operator.md, "Re-scanning a deposit
   * address"): a transfer the indexer never published (a customer watched from the indexer's checkpoint before
   * 6eefdeb, an indexer outage longer than its window, an RPC that answered incomplete logs) reaches the intake
   * through `observe`, which takes each transfer once. Another merchant's customer is 404.
   */
  async rescan(command: DepositRescanCommand): Promise<DepositRescanAnswer[]> {
    const [created] = await this.store.readStream(customerStreamId(command.id), { maxCount: 1 });
    const mode = created?.metadata.mode;
    if (
      created?.type !== 'CustomerCreated.v1' ||
      created.metadata.merchantId !== command.merchantId ||
      (mode !== 'test' && mode !== 'live')
    )
      throw notFound('customer', command.id);
    const data = created.data as { depositAddresses: DepositAddress[]; createdAt: string };
    const set = this.relayers?.set;
    return rescanDeposits(command, {
      addresses: data.depositAddresses.map((d) => d.address),
      chains: this.active && set ? this.watchedChains(mode) : [],
      createdAt: data.createdAt,
      provider: (chain) => {
        if (!set) throw new Error('no chain provider');
        return set.for(chain).provider;
      },
      indexer: this.watches,
    });
  }

  private async watch(message: BusMessage): Promise<void> {
    if (message.type !== 'CustomerCreated.v1') return;
    const mode = message.metadata.mode;
    if (mode !== 'test' && mode !== 'live') throw new Error(`event ${message.id} has no mode metadata`);
    const data = message.data as { depositAddresses: DepositAddress[]; createdAt: string };
    for (const chain of this.watchedChains(mode)) {
      const fromBlock = await this.blockBeforeCreation(chain, data.createdAt);
      for (const { address } of data.depositAddresses)
        await this.watches.watchAddress({ chain, address, fromBlock });
    }
  }

  /**
   * The first block a customer's deposit address watch scans: one mined before the customer was created. The merchant
   * has the address in the answer of POST /customers and this consumer registers the watch later (by the bus's lag,
   * seconds under load, longer after an outage); a watch from the indexer's checkpoint then would start past a
   * transfer already mined, which would fund no payout and stay at the address. Nothing can be sent to the address
   * before the customer exists (it is derived from the customer's id), so no earlier block is needed.
   */
  private async blockBeforeCreation(chain: string, createdAt: string): Promise<number> {
    const set = this.relayers?.set;
    if (!set) throw new Error('no chain provider to find the block of the customer creation');
    return blockMinedBefore(set.for(chain).provider, createdAt);
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
    // A mint's log names no sender: the minting transaction's sender is recorded and screened, but a bridge's mint
    // is sent by its relayer, so the deposit is marked minted and nothing goes back to that sender by itself.
    const origin = this.relayers?.set
      ? await this.relayers.set.transferOrigin(t)
      : { from: t.from, minted: false };
    await this.intake.record(customer, {
      chain: t.chain,
      token: token.symbol,
      amount: t.amount,
      from: origin.from,
      ...(origin.minted ? { minted: true } : {}),
      txHash: t.txHash,
      logIndex: t.logIndex,
      ...(t.blockHash ? { blockHash: t.blockHash } : {}),
    });
  }
}
