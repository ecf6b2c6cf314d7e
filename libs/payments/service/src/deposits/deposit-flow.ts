import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { DataSource } from 'typeorm';
import { CLOCK, EVENT_STORE } from '@stablepay/aggregate';
import {
  CHAIN_OPERATOR_CONFIG,
  IndexerWatchClient,
  OperatorRelayers,
  type ChainOperatorConfig,
} from '@stablepay/chain-operator';
import { parseCaip19 } from '@stablepay/evm';
import { type BusMessage, type BusSubscription, EVENT_BUS, type EventBus } from '@stablepay/event-bus';
import type { EventStore } from '@stablepay/event-store';
import {
  addressesToScreen,
  paymentStreamId,
  type PaymentDeployRequested,
  type PaymentState,
} from '@stablepay/payments-domain';
import { type Clock, JsonLogger } from '@stablepay/util';
import { ConfirmDepositTransferHandler } from '../commands/confirm-deposit-transfer/confirm-deposit-transfer.handler';
import { ObserveDepositTransferHandler } from '../commands/observe-deposit-transfer/observe-deposit-transfer.handler';
import { PaymentFacts } from '../commands/payment-facts';
import { RecordDepositDeploymentHandler } from '../commands/record-deposit-deployment/record-deposit-deployment.handler';
import { RecordScreeningHandler } from '../commands/record-screening/record-screening.handler';
import { RetractDepositTransferHandler } from '../commands/retract-deposit-transfer/retract-deposit-transfer.handler';
import { DepositContracts } from './deposit-contracts';
import { DepositStore } from './deposit.store';
import { SANCTIONS_SCREENING, type SanctionsScreening } from './sanctions';

const PAYMENT_TOPIC = 'payments.payment.v1';
const CHAIN_TOPIC = 'indexer.chain-observation.v1';
export const DEPOSIT_WATCH_GROUP = 'payments.deposit-chain';
export const DEPOSIT_OBSERVATION_GROUP = 'payments.deposit-observations';
const TICK_MS = 500;
const MAX_BACKOFF_MS = 60_000;

interface Erc20Transfer {
  readonly chain: string;
  readonly blockNumber: string;
  readonly blockTime: string;
  readonly txHash: string;
  readonly logIndex: number;
  readonly asset: string;
  readonly from: string;
  readonly to: string;
  readonly amount: string;
}

/**
 * One-time payment deposits on chain (docs/payment-deposits.md), in three durable loops:
 *
 * 1. Payment events (group `payments.deposit-chain`): a created payment's deposit address is recorded and watched
 *    on every accepted chain (indexer watch command); after every payment event the payment is advanced: its
 *    senders screened (sanctions port), its deposit deployed once the aggregate asks for it (the attested payer is
 *    the funding transfer's sender), a flag carried on chain.
 * 2. Chain observations (group `payments.deposit-observations`): a transfer into a deposit address becomes
 *    ObserveTransfer (classified by the aggregate: funding or non-funding), a retraction RetractTransfer.
 * 3. A worker confirms observed transfers once their chain's required confirmations are reached, and re-runs the
 *    payments whose chain work failed (provider unreachable, RPC down, revert) with exponential backoff.
 */
@Injectable()
export class DepositFlow implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new JsonLogger('payment-deposits');
  private readonly store: DepositStore;
  private readonly contracts: DepositContracts | null;
  private subscriptions: BusSubscription[] = [];
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private stopped = false;
  private readonly inFlight = new Map<string, Promise<void>>();

  constructor(
    @Inject(CHAIN_OPERATOR_CONFIG) private readonly config: ChainOperatorConfig,
    @Inject(OperatorRelayers) private readonly relayers: OperatorRelayers,
    @Inject(IndexerWatchClient) private readonly watches: IndexerWatchClient,
    @Inject(SANCTIONS_SCREENING) private readonly screening: SanctionsScreening,
    @Inject(DataSource) dataSource: DataSource,
    @Inject(EVENT_BUS) private readonly bus: EventBus,
    @Inject(EVENT_STORE) private readonly events: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(PaymentFacts) private readonly facts: PaymentFacts,
    @Inject(ObserveDepositTransferHandler) private readonly observe: ObserveDepositTransferHandler,
    @Inject(ConfirmDepositTransferHandler) private readonly confirm: ConfirmDepositTransferHandler,
    @Inject(RetractDepositTransferHandler) private readonly retract: RetractDepositTransferHandler,
    @Inject(RecordScreeningHandler) private readonly recordScreening: RecordScreeningHandler,
    @Inject(RecordDepositDeploymentHandler) private readonly recordDeployment: RecordDepositDeploymentHandler,
  ) {
    this.store = new DepositStore(dataSource);
    this.contracts =
      config.enabled && config.addresses && relayers.set
        ? new DepositContracts(relayers.set, config.addresses.paymentFactory)
        : null;
  }

  async onApplicationBootstrap(): Promise<void> {
    if (!this.contracts) return;
    this.subscriptions.push(
      await this.bus.consume({
        group: DEPOSIT_WATCH_GROUP,
        topics: [PAYMENT_TOPIC],
        handler: (message) => this.onPaymentEvent(message),
        onError: (error, message) =>
          this.logger.error({
            msg: 'payment deposit step failed, will retry',
            messageId: message.id,
            error: String(error),
          }),
      }),
      await this.bus.consume({
        group: DEPOSIT_OBSERVATION_GROUP,
        topics: [CHAIN_TOPIC],
        handler: (message) => this.onObservation(message),
        onError: (error, message) =>
          this.logger.error({
            msg: 'deposit observation failed, will retry',
            messageId: message.id,
            error: String(error),
          }),
      }),
    );
    this.schedule();
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await Promise.all(this.subscriptions.map((s) => s.stop()));
    await this.ticking;
    await Promise.all(this.inFlight.values());
  }

  /** Resolves once both consumers handled everything published before the call. */
  async caughtUp(): Promise<void> {
    await Promise.all(this.subscriptions.map((s) => s.caughtUp()));
  }

  async onPaymentEvent(message: BusMessage): Promise<void> {
    const paymentId = message.key.slice('payment-'.length);
    if (message.type === 'PaymentCreated.v1') {
      const data = message.data as { depositAddress: string; acceptedAssets: readonly { chain: string }[] };
      await this.store.addAddress(data.depositAddress, paymentId);
      // Every accepted chain: the deposit address is the same on each, and the customer picks one.
      const chains = [...new Set(data.acceptedAssets.map((a) => a.chain))].filter((c) =>
        this.config.chains.some((k) => k.caip2 === c),
      );
      for (const chain of chains) await this.watches.watchAddress({ chain, address: data.depositAddress });
    }
    await this.advance(paymentId, false);
  }

  async onObservation(message: BusMessage): Promise<void> {
    if (message.type === 'Erc20TransferObserved.v1') {
      const t = message.data as Erc20Transfer;
      const paymentId = await this.store.paymentOf(t.to);
      if (!paymentId) return;
      await this.store.addTransfer({
        observation_id: message.id,
        payment_id: paymentId,
        chain: t.chain,
        tx_hash: t.txHash,
        log_index: t.logIndex,
        block_number: t.blockNumber,
      });
      await this.observe.handle(
        paymentId,
        {
          txHash: t.txHash,
          logIndex: t.logIndex,
          from: t.from,
          asset: t.asset,
          chain: t.chain,
          amount: t.amount,
          blockNumber: t.blockNumber,
        },
        new Date(t.blockTime),
        message.id,
      );
      this.wake();
      return;
    }
    if (message.type === 'ObservationRetracted.v1') {
      const r = message.data as { observationId: string };
      const transfer = await this.store.transfer(r.observationId);
      if (!transfer || transfer.state === 'retracted') return;
      await this.retract.handle(
        transfer.payment_id,
        { chain: transfer.chain, txHash: transfer.tx_hash, logIndex: transfer.log_index },
        message.id,
      );
      await this.store.mark(r.observationId, 'retracted');
      this.logger.warn({
        msg: 'deposit transfer retracted by a reorg',
        paymentId: transfer.payment_id,
        chain: transfer.chain,
        txHash: transfer.tx_hash,
      });
    }
  }

  /** One payment's chain work, never two at once for the same payment in this process. */
  advance(paymentId: string, fromTimer: boolean): Promise<void> {
    const previous = this.inFlight.get(paymentId) ?? Promise.resolve();
    const next = previous.then(() => this.advanceNow(paymentId, fromTimer));
    const tracked = next.finally(() => {
      if (this.inFlight.get(paymentId) === tracked) this.inFlight.delete(paymentId);
    });
    this.inFlight.set(paymentId, tracked);
    return next;
  }

  private async advanceNow(paymentId: string, fromTimer: boolean): Promise<void> {
    if (!this.contracts) return;
    const { state } = await this.facts.load(paymentId);
    const created = state.created;
    if (!created) return;
    try {
      if (state.flagged) return await this.flagOnChain(paymentId, state);
      const toScreen = addressesToScreen(state);
      if (toScreen.length > 0) {
        const attempts = await this.store.attempts(paymentId);
        // Held for a re-screen: the timer runs it, an unrelated event does not jump the backoff.
        if (state.screeningPending && attempts > 0 && !fromTimer) return;
        const result = await this.screening.screen(toScreen);
        await this.recordScreening.handle(
          paymentId,
          toScreen,
          result,
          `${paymentId}:${toScreen.join(',')}:${result.kind}:${attempts}`,
        );
        if (result.kind === 'unreachable') {
          await this.retryLater(paymentId, attempts, 'sanctions screening provider unreachable');
          return;
        }
        await this.store.clearRetry(paymentId);
        return; // the facts just appended come back through the bus and advance the payment further
      }
      if (state.deployRequested && !state.deployment && state.phase !== 'failed') {
        await this.deploy(paymentId, state);
        return;
      }
      // Nothing left to do on chain for now (settled, failed, waiting for funds): no retry stays scheduled.
      if (fromTimer) await this.store.clearRetry(paymentId);
    } catch (error) {
      await this.retryLater(
        paymentId,
        await this.store.attempts(paymentId),
        error instanceof Error ? error.message : String(error),
      );
    }
  }

  private async deploy(paymentId: string, state: PaymentState): Promise<void> {
    const created = state.created;
    if (!created || !this.contracts) return;
    const stored = await this.events.readStream(paymentStreamId(paymentId));
    const requested = [...stored].reverse().find((e) => e.type === 'PaymentDeployRequested.v1')?.data as
      PaymentDeployRequested['data'] | undefined;
    if (!requested) return;
    const outcome = await this.contracts.deploy({
      chain: requested.chain,
      merchantId: created.merchantId,
      onChainPaymentId: created.onChainId,
      method: requested.method,
      token: parseCaip19(requested.asset).address,
      payer: requested.payer,
      amount: BigInt(requested.amount),
      authorizationPeriodSeconds: created.authorizationPeriodSeconds,
    });
    if (outcome.kind === 'retry') {
      await this.retryLater(paymentId, await this.store.attempts(paymentId), outcome.error);
      return;
    }
    await this.recordDeployment.handle(paymentId, {
      txHash: outcome.txHash,
      chain: requested.chain,
      method: requested.method,
      payer: outcome.payer,
      payerFinalAt: outcome.payerFinalAt,
      amount: outcome.amount.toString(),
      settlementAddress: outcome.settlement,
      authorizationExpiry: outcome.authorizationExpiry,
    });
    await this.store.clearRetry(paymentId);
    this.logger.log({
      msg: 'deposit deployed',
      paymentId,
      chain: requested.chain,
      method: requested.method,
      txHash: outcome.txHash,
    });
  }

  private async flagOnChain(paymentId: string, state: PaymentState): Promise<void> {
    const created = state.created;
    if (!created || !this.contracts) return;
    const chains = [...new Set(created.acceptedAssets.map((a) => a.chain))].filter((c) =>
      this.config.chains.some((k) => k.caip2 === c),
    );
    for (const chain of chains) {
      const result = await this.contracts.flag(chain, created.merchantId, created.onChainId);
      if (!result.done) {
        await this.retryLater(
          paymentId,
          await this.store.attempts(paymentId),
          `flagPayment on ${chain}: ${result.error}`,
        );
        return;
      }
    }
    await this.store.clearRetry(paymentId);
  }

  private async retryLater(paymentId: string, attempts: number, error: string): Promise<void> {
    const delay = Math.min(MAX_BACKOFF_MS, 1_000 * 2 ** Math.min(attempts, 16));
    await this.store.scheduleRetry(paymentId, new Date(this.clock.now().getTime() + delay), error);
    this.logger.warn({
      msg: 'payment deposit step will be retried',
      paymentId,
      attempts: attempts + 1,
      retryInMs: delay,
      error,
    });
  }

  private wake(): void {
    if (!this.ticking) this.schedule(0);
  }

  private schedule(ms = TICK_MS): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.ticking = this.tick().finally(() => {
        this.ticking = undefined;
        this.schedule();
      });
    }, ms);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    try {
      await this.confirmTransfers();
      // Backoff timers run in wall time against the injected clock's "now" (a test clock makes them due at once).
      for (const paymentId of await this.store.dueRetries(
        new Date(Math.max(Date.now(), this.clock.now().getTime())),
      ))
        await this.advance(paymentId, true);
    } catch (error) {
      this.logger.error({ msg: 'deposit worker failed, will retry', error: String(error) });
    }
  }

  private async confirmTransfers(): Promise<void> {
    const set = this.relayers.set;
    if (!set) return;
    for (const chain of this.config.chains) {
      const head = await set.for(chain.caip2).provider.getBlockNumber();
      const through = head - chain.confirmations + 1;
      for (const t of await this.store.open(chain.caip2, through)) {
        await this.confirm.handle(
          t.payment_id,
          { chain: t.chain, txHash: t.tx_hash, logIndex: t.log_index },
          t.observation_id,
        );
        await this.store.mark(t.observation_id, 'confirmed');
      }
    }
  }
}
