import { getAddress } from 'ethers';
import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  type OnApplicationBootstrap,
  Optional,
} from '@nestjs/common';
import { Counter, Histogram, register } from 'prom-client';
import { DataSource } from 'typeorm';
import { CLOCK, EVENT_STORE } from '@stablepay/aggregate';
import {
  CHAIN_OPERATOR_CONFIG,
  IndexerWatchClient,
  OperatorRelayers,
  type ChainOperatorConfig,
  type RescannedOutflow,
} from '@stablepay/chain-operator';
import { blockMinedBefore, DEFAULT_CHAIN_LOG_RANGE, parseCaip19 } from '@stablepay/evm';
import {
  type BusMessage,
  type BusSubscription,
  chainObservationIsolationKey,
  EVENT_BUS,
  type EventBus,
} from '@stablepay/event-bus';
import type { EventStore } from '@stablepay/event-store';
import {
  addressesToScreen,
  deploymentKey,
  deploymentToVerify,
  outflowLogRecorded,
  paymentAsset,
  paymentStreamId,
  sameTransfer,
  type PaymentDeployRequested,
  type PaymentState,
} from '@stablepay/payments-domain';
import { ReadinessRegistry } from '@stablepay/http';
import { type Clock, JsonLogger } from '@stablepay/util';
import { ConfirmDepositTransferHandler } from '../commands/confirm-deposit-transfer/confirm-deposit-transfer.handler';
import { ObserveDepositTransferHandler } from '../commands/observe-deposit-transfer/observe-deposit-transfer.handler';
import { PaymentFacts } from '../commands/payment-facts';
import { RecordDepositDeploymentHandler } from '../commands/record-deposit-deployment/record-deposit-deployment.handler';
import {
  outflowRecordKey,
  RecordDepositOutflowHandler,
} from '../commands/record-deposit-outflow/record-deposit-outflow.handler';
import { DEPOSIT_OUTFLOW_EVENTS } from '../chain/deposit-chain';
import {
  type PayerLogSighting,
  payerEventCommand,
  payerEventIdempotencyKey,
} from '../commands/record-payer-event/payer-event';
import { RecordDeployHoldHandler } from '../commands/record-deploy-hold/record-deploy-hold.handler';
import { RecordScreeningHandler } from '../commands/record-screening/record-screening.handler';
import { RetractDepositTransferHandler } from '../commands/retract-deposit-transfer/retract-deposit-transfer.handler';
import { PaymentMerchantProfiles } from '../payments/merchant-profiles';
import { DepositChainHealth, trackDepositChains, untrackDepositChains } from './deposit-chain-health';
import { DepositContracts } from './deposit-contracts';
import { DepositStore, type RecordedReceipt } from './deposit.store';
import { SANCTIONS_SCREENING, type SanctionsScreening } from '@stablepay/evm';

const PAYMENT_TOPIC = 'payments.payment.v1';
const CHAIN_TOPIC = 'indexer.chain-observation.v1';
export const DEPOSIT_WATCH_GROUP = 'payments.deposit-chain';
export const DEPOSIT_OBSERVATION_GROUP = 'payments.deposit-observations';
const TICK_MS = 500;
/**
 * Observation ids of the outflows an operator's re-scan queued (`rescan-outflow:<chain>:<tx>:<logIndex>:<block>`):
 * no indexer sighting, so no retraction will ever come for them (DepositFlow.rescanOutflows).
 */
const RESCAN_OUTFLOW = 'rescan-outflow:';
const MAX_BACKOFF_MS = 60_000;
/**
 * The block hash of a deploy receipt queued with its block unknown (DepositFlow.watchDeposit): by a process that could
 * not read its chain, or with no receipt yet.
 */
const UNPLACED_BLOCK = '';
/** Deadline of the worker's chain reads (head, block hashes): ethers' own default would hold every confirmation for 300 s. */
const HEAD_DEADLINE_MS = 10_000;
/** A worker pass still running after this long is reported (log + metric) while it goes on. */
const STALL_AFTER_MS = 15_000;
/** An open receipt whose transaction stays pending (or whose height has no block) this long is reported, once. */
const UNDECIDED_REPORT_AFTER_S = 30 * 60;
/**
 * How long a recorded deploy must stay on no chain (no receipt, not in the node's pool), read so across passes,
 * before it is declared lost (PaymentDepositsOptions.deployLostGraceSeconds).
 */
export const DEPLOY_LOST_GRACE_S = Symbol('DEPLOY_LOST_GRACE_S');
export const DEFAULT_DEPLOY_LOST_GRACE_S = 5 * 60;

function workerMetrics(): {
  passSeconds: Histogram;
  stalls: Counter;
  rpcDeadlines: Counter<'chain'>;
  registryMismatches: Counter<'chain'>;
  chainModeSkips: Counter<'chain' | 'step'>;
  outflowsRetractedAfterRecord: Counter<'chain' | 'kind'>;
  deploysLost: Counter<'chain' | 'outcome'>;
  receiptsUndecided: Counter<'chain' | 'kind' | 'reason'>;
  deploysOnUnreadChain: Counter<'chain'>;
} {
  const get = <T>(name: string, make: () => T): T =>
    (register.getSingleMetric(name) as T | undefined) ?? make();
  // Get-or-create: tests and the embedded run host several applications on prom-client's one default registry.
  return {
    passSeconds: get(
      'stablepay_payment_deposit_worker_pass_seconds',
      () =>
        new Histogram({
          name: 'stablepay_payment_deposit_worker_pass_seconds',
          help: 'Duration of a deposit worker pass (chain heads read, due transfers confirmed, due retries started)',
          buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
        }),
    ),
    stalls: get(
      'stablepay_payment_deposit_worker_stalls_total',
      () =>
        new Counter({
          name: 'stablepay_payment_deposit_worker_stalls_total',
          help: `Deposit worker passes still running after ${STALL_AFTER_MS / 1000} s (no confirmation moves meanwhile)`,
        }),
    ),
    rpcDeadlines: get(
      'stablepay_payment_deposit_rpc_deadlines_total',
      () =>
        new Counter({
          name: 'stablepay_payment_deposit_rpc_deadlines_total',
          help: 'Chain reads of the deposit worker (head, block hashes) abandoned at their deadline, by chain',
          labelNames: ['chain'],
        }),
    ),
    registryMismatches: get(
      'stablepay_payment_deposit_registry_mismatches_total',
      () =>
        new Counter({
          name: 'stablepay_payment_deposit_registry_mismatches_total',
          help: 'Deposit deploys held because the registry merchant record differs from the service record, by chain',
          labelNames: ['chain'],
        }),
    ),
    chainModeSkips: get(
      'stablepay_payment_deposit_chain_mode_skips_total',
      () =>
        new Counter({
          name: 'stablepay_payment_deposit_chain_mode_skips_total',
          help: "Chain steps (deploy, flag) not taken for a payment of the other mode than the deployment's chains, by chain and step",
          labelNames: ['chain', 'step'],
        }),
    ),
    deploysLost: get(
      'stablepay_payment_deposit_deploys_lost_total',
      () =>
        new Counter({
          name: 'stablepay_payment_deposit_deploys_lost_total',
          help: 'Deposit deploys a reorg took back before their confirmations, on no chain: undone (the payment deploys again) or kept (check the deposit), by chain and outcome',
          labelNames: ['chain', 'outcome'],
        }),
    ),
    receiptsUndecided: get(
      'stablepay_payment_deposit_receipts_undecided_total',
      () =>
        new Counter({
          name: 'stablepay_payment_deposit_receipts_undecided_total',
          help: `Recorded deploys and outflows whose transaction stayed pending in the node's pool (or whose height had no block) for ${UNDECIDED_REPORT_AFTER_S / 60} min after their confirmations were due, by chain, kind and reason; counted once per process`,
          labelNames: ['chain', 'kind', 'reason'],
        }),
    ),
    outflowsRetractedAfterRecord: get(
      'stablepay_payment_deposit_outflow_retracted_after_record_total',
      () =>
        new Counter({
          name: 'stablepay_payment_deposit_outflow_retracted_after_record_total',
          help: 'Deposit outflows the payment had recorded whose block a reorg retracted (the fact stands; check the deposit), by chain and kind',
          labelNames: ['chain', 'kind'],
        }),
    ),
    deploysOnUnreadChain: get(
      'stablepay_payment_deposit_deploys_on_unread_chain_total',
      () =>
        new Counter({
          name: 'stablepay_payment_deposit_deploys_on_unread_chain_total',
          help: 'DIRECT/TWO_STEP deploys recorded on a chain the recording process does not read (queued for a worker that reads it; announced only there), by chain',
          labelNames: ['chain'],
        }),
    ),
  };
}

/** The payment facts that say the deposit contract now exists on a chain (its deployment's receipt). */
const DEPLOYMENT_FACTS: ReadonlySet<string> = new Set([
  'PaymentSettled.v1',
  'PaymentEscrowFunded.v1',
  'PaymentDepositDeployed.v1',
]);

/** The deployment facts a merchant is told of (payment.settled / payment.escrow_confirmed) at the confirmations. */
const ANNOUNCED_DEPLOYMENT_FACTS: ReadonlySet<string> = new Set([
  'PaymentSettled.v1',
  'PaymentEscrowFunded.v1',
]);

/** The outflow facts, by the kind of their receipt row. */
const OUTFLOW_FACTS: Readonly<Record<string, RecordedReceipt['kind'] | undefined>> = {
  'PaymentCaptured.v1': 'captured',
  'PaymentRefunded.v1': 'refunded',
  'PaymentReclaimed.v1': 'reclaimed',
  'PaymentRecovered.v1': 'recovered',
  'PaymentRescued.v1': 'rescued',
};

/** The indexer's PaymentDepositEventObserved.v1, read structurally (docs/asyncapi.yaml). */
interface DepositEventObserved {
  readonly chain: string;
  readonly blockNumber: string;
  readonly blockHash?: string;
  readonly txHash: string;
  readonly logIndex: number;
  readonly contract: string;
  readonly event: string;
  readonly args: Readonly<Record<string, string>>;
}

/** The indexer's ObservationRetracted.v1, read structurally (docs/asyncapi.yaml). */
interface RetractedObservation {
  readonly chain: string;
  readonly observationId: string;
  readonly observationType: string;
  readonly txHash: string;
  readonly logIndex: number;
  readonly blockHash: string;
  readonly address?: string;
}

interface Erc20Transfer {
  readonly chain: string;
  readonly blockNumber: string;
  readonly blockHash?: string;
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
 *    Once deployed, the deposit contract itself is watched from its deployment block (every event it emits).
 * 2. Chain observations (group `payments.deposit-observations`): a transfer into a deposit address becomes
 *    ObserveTransfer (classified by the aggregate: funding or non-funding), a retraction RetractTransfer; a movement
 *    out of a deployed deposit (capture, refund, reclaim, recover, rescue, whoever sent it) is queued, and a
 *    retraction before it was recorded drops it (it never happened).
 * 3. A worker confirms observed transfers once their chain's required confirmations are reached, records the
 *    queued outflows at the same depth (RecordOutflow, keyed by the log like the action's own receipt: one fact),
 *    and re-runs the payments whose chain work failed (provider unreachable, RPC down, revert) with exponential
 *    backoff.
 */
@Injectable()
export class DepositFlow implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new JsonLogger('payment-deposits');
  private readonly store: DepositStore;
  private readonly contracts: DepositContracts | null;
  private subscriptions: BusSubscription[] = [];
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  /** A wake that came while a pass ran: the next pass starts at once (the running one may have read too early). */
  private wokenDuringTick = false;
  private stopped = false;
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly unrecordedWarned = new Set<string>();
  private readonly orphanWarned = new Set<string>();
  private readonly undecidedReported = new Set<string>();
  private readonly metrics = workerMetrics();
  private chainHealth: DepositChainHealth | undefined;

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
    @Inject(RecordDepositOutflowHandler) private readonly recordOutflow: RecordDepositOutflowHandler,
    @Inject(PaymentMerchantProfiles) private readonly merchants: PaymentMerchantProfiles,
    @Inject(RecordDeployHoldHandler) private readonly recordHold: RecordDeployHoldHandler,
    @Inject(ReadinessRegistry) private readonly readiness: ReadinessRegistry,
    @Optional()
    @Inject(DEPLOY_LOST_GRACE_S)
    private readonly deployLostGraceS: number = DEFAULT_DEPLOY_LOST_GRACE_S,
  ) {
    this.store = new DepositStore(dataSource);
    this.contracts =
      config.enabled && config.addresses && relayers.set
        ? new DepositContracts(
            relayers.set,
            config.addresses.paymentFactory,
            config.addresses.registry,
            (chain) => config.chains.find((c) => c.caip2 === chain)?.logRange ?? DEFAULT_CHAIN_LOG_RANGE,
          )
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
        // Per deposit address, not per chain: an observation one payment cannot take holds back only that payment.
        isolationKey: chainObservationIsolationKey,
        handler: (message) => this.onObservation(message),
        onError: (error, message) =>
          this.logger.error({
            msg: 'deposit observation failed, will retry',
            messageId: message.id,
            error: String(error),
          }),
      }),
    );
    this.watchChainHealth();
    this.schedule();
  }

  /**
   * A chain whose head the worker cannot read confirms no deposit: /ready says so (degraded, 200: the API and the
   * other chains still serve, and every replica asks the same node, as the indexer's chain_followers check does)
   * and per-chain gauges show the silence.
   */
  private watchChainHealth(): void {
    if (!this.relayers.set || this.config.chains.length === 0) return;
    const health = new DepositChainHealth(
      this.config.chains.map((c) => c.caip2),
      this.clock,
    );
    this.chainHealth = health;
    trackDepositChains(health);
    this.readiness.register('deposit_chains', async () =>
      health
        .status()
        .flatMap((s) => s.stalled ?? [])
        .join('; '),
    );
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.chainHealth) untrackDepositChains(this.chainHealth);
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
      const data = message.data as {
        depositAddress: string;
        acceptedAssets: readonly { chain: string }[];
        createdAt: string;
      };
      await this.store.addAddress(data.depositAddress, paymentId);
      // Every accepted chain: the deposit address is the same on each, and the customer picks one.
      const chains = [...new Set(data.acceptedAssets.map((a) => a.chain))].filter((c) =>
        this.config.chains.some((k) => k.caip2 === c),
      );
      for (const chain of chains)
        await this.watches.watchAddress({
          chain,
          address: data.depositAddress,
          fromBlock: await this.blockBeforeCreation(chain, data.createdAt),
        });
    }
    if (DEPLOYMENT_FACTS.has(message.type)) {
      await this.watchDeposit(
        paymentId,
        message.data as { deployTxHash: string; chain: string },
        ANNOUNCED_DEPLOYMENT_FACTS.has(message.type),
      );
    }
    const outflowKind = OUTFLOW_FACTS[message.type];
    if (outflowKind) await this.rememberOutflowReceipt(paymentId, outflowKind, message.data);
    await this.advance(paymentId, false);
  }

  /**
   * The first block a deposit address's watch scans: one mined before the payment was created. The customer has the
   * address from the moment the checkout answers, and this consumer registers the watch later (by the bus's lag,
   * seconds under load, longer after an outage); a watch from the indexer's checkpoint then would start past a
   * transfer already mined and never see it. Nothing was sent to the address before the payment existed, so no
   * earlier block is needed; the lag covers a chain clock behind the service's.
   */
  private async blockBeforeCreation(chain: string, createdAt: string): Promise<number> {
    const set = this.relayers.set;
    if (!set) throw new Error('no chain provider to find the block of the payment creation');
    return blockMinedBefore(set.for(chain).provider, createdAt);
  }

  /**
   * Watches the deployed deposit contract from its deployment block: what anyone else moves out of it (a capture
   * relayed with the merchant's signature, the payer's reclaim) reaches the payment through the indexer. Registered
   * from the deployment fact (not after the deploy call) so a crash in between still watches it on redelivery.
   */
  private async watchDeposit(
    paymentId: string,
    deployment: { deployTxHash: string; chain: string },
    announced: boolean,
  ): Promise<void> {
    const set = this.relayers.set;
    if (!set || !this.config.chains.some((c) => c.caip2 === deployment.chain)) {
      if (announced) await this.queueDeployOnUnreadChain(paymentId, deployment);
      return;
    }
    const { state } = await this.facts.load(paymentId);
    if (!state.created) return;
    // An old fact redelivered after the deploy was undone (PaymentDeploymentLost.v1), or of a deploy another one
    // replaced: nothing of it to watch or confirm. Thrown, it would park the payment's stream for good.
    if (state.deployment?.txHash.toLowerCase() !== deployment.deployTxHash.toLowerCase()) return;
    const receipt = await set.for(deployment.chain).provider.getTransactionReceipt(deployment.deployTxHash);
    // A DIRECT or TWO_STEP deploy is announced once its block has the chain's confirmations (the worker). No receipt
    // (a reorg dropped it before this fact was handled, or a node behind the one that mined it): queued all the same,
    // its block unknown (0, UNPLACED_BLOCK: never the canonical one), so the receipt pass decides it: followed where it
    // is mined, or lost once on no chain for the grace. Thrown instead, the bus would redeliver it for good.
    if (announced) {
      await this.store.addReceipt({
        // A new row for the same deploy recorded again after a loss: the lost one's is closed.
        receipt_id: deploymentKey(state, 'deploy', deployment.deployTxHash.toLowerCase()),
        payment_id: paymentId,
        chain: deployment.chain,
        tx_hash: deployment.deployTxHash,
        log_index: null,
        kind: 'deployed',
        block_number: receipt ? String(receipt.blockNumber) : '0',
        block_hash: receipt?.blockHash ?? UNPLACED_BLOCK,
      });
      this.wake();
    }
    await this.watches.watchContract({
      chain: deployment.chain,
      address: state.created.depositAddress,
      kind: 'payment_deposit',
      // Its block unknown: from before the payment existed (nothing was sent to the address earlier).
      fromBlock: receipt
        ? receipt.blockNumber
        : await this.blockBeforeCreation(deployment.chain, state.created.createdAt),
    });
  }

  /**
   * A DIRECT or TWO_STEP deploy recorded on a chain this process does not read (not in its chains, or no relayers):
   * skipped, it would never be confirmed nor announced. Its receipt row is queued without its block (number 0, no hash),
   * under the id the reading process would give it: the worker of any process that reads the chain finds the
   * transaction where it is (as a deploy mined again elsewhere), watches the deposit contract from that block
   * (watchPlacedDeposit: the watch below is never reached here), follows it there and confirms it at its depth. Said
   * loudly, as no worker of this process will: if none reads the chain, it is never announced.
   */
  private async queueDeployOnUnreadChain(
    paymentId: string,
    deployment: { deployTxHash: string; chain: string },
  ): Promise<void> {
    const { state } = await this.facts.load(paymentId);
    // As where the chain is read: an old fact of a deploy undone or replaced queues nothing, and the deploy recorded
    // again after a loss gets a new row (the lost one's is closed; under its id this one would never be confirmed).
    if (state.deployment?.txHash.toLowerCase() !== deployment.deployTxHash.toLowerCase()) return;
    await this.store.addReceipt({
      receipt_id: deploymentKey(state, 'deploy', deployment.deployTxHash.toLowerCase()),
      payment_id: paymentId,
      chain: deployment.chain,
      tx_hash: deployment.deployTxHash,
      log_index: null,
      kind: 'deployed',
      block_number: '0',
      block_hash: UNPLACED_BLOCK,
    });
    this.metrics.deploysOnUnreadChain.inc({ chain: deployment.chain });
    this.logger.error({
      msg: 'deposit deploy recorded on a chain this process does not read: queued for the worker of a process that reads it, announced only at its confirmations there',
      paymentId,
      chain: deployment.chain,
      deployTxHash: deployment.deployTxHash,
    });
  }

  /**
   * An outflow the payment recorded (from our action's receipt at one confirmation, or the worker's sighting) is
   * checked by the worker at the chain's confirmations against the block it was recorded from: the indexer reads
   * INDEXER_CONFIRMATIONS behind the head, so a reorg within that depth has no sighting to retract. Facts from before
   * the block number was kept are not checked (as before).
   */
  private async rememberOutflowReceipt(
    paymentId: string,
    kind: RecordedReceipt['kind'],
    data: unknown,
  ): Promise<void> {
    const d = data as { txHash: string; logIndex?: number; blockHash?: string; blockNumber?: string };
    if (d.logIndex === undefined || d.blockHash === undefined || d.blockNumber === undefined) return;
    const chain = (await this.facts.load(paymentId)).state.deployment?.chain;
    if (!chain || !this.config.chains.some((c) => c.caip2 === chain)) return;
    await this.store.addReceipt({
      receipt_id: `outflow:${d.txHash.toLowerCase()}:${d.logIndex}:${d.blockHash.toLowerCase()}`,
      payment_id: paymentId,
      chain,
      tx_hash: d.txHash,
      log_index: d.logIndex,
      kind,
      block_number: d.blockNumber,
      block_hash: d.blockHash,
    });
    this.wake();
  }

  /** A stablecoin of the deployment's on that chain (ObservedTransfer.listed), not any contract's Transfer log. */
  private listsStablecoin(chain: string, asset: string): boolean {
    const id = asset.toLowerCase();
    return (
      this.config.chains
        .find((c) => c.caip2 === chain)
        ?.stablecoins.some((s) => s.assetId.toLowerCase() === id) ?? false
    );
  }

  async onObservation(message: BusMessage): Promise<void> {
    if (message.type === 'Erc20TransferObserved.v1') {
      const t = message.data as Erc20Transfer;
      const paymentId = await this.store.paymentOf(t.to);
      if (!paymentId) return;
      // The payment records the transfer BEFORE it enters the confirmation queue: the worker confirming a
      // transfer the payment has not recorded yet decides nothing, and the transfer then never got confirmed
      // (a deposit stuck at pending, seen on the shared test stack and after restarts of npm start). A crash
      // between the two is redelivered: the observe appends nothing the second time, the row is added.
      // A mint's log names no sender: its minting transaction's sender is listed and screened, but is not taken for
      // the payer (a bridge's relayer sends it; docs/payments.md, The payer).
      const origin = this.contracts
        ? await this.contracts.transferOrigin(t)
        : { from: t.from, minted: false };
      await this.observe.handle(
        paymentId,
        {
          txHash: t.txHash,
          logIndex: t.logIndex,
          from: origin.from,
          ...(origin.minted ? { minted: true } : {}),
          asset: t.asset,
          chain: t.chain,
          amount: t.amount,
          blockNumber: t.blockNumber,
          listed: this.listsStablecoin(t.chain, t.asset),
        },
        new Date(t.blockTime),
        message.id,
      );
      await this.store.addTransfer({
        observation_id: message.id,
        payment_id: paymentId,
        chain: t.chain,
        tx_hash: t.txHash,
        log_index: t.logIndex,
        block_number: t.blockNumber,
        block_hash: t.blockHash?.toLowerCase() ?? null,
      });
      this.wake();
      return;
    }
    if (message.type === 'PaymentDepositEventObserved.v1') {
      const e = message.data as DepositEventObserved;
      if (e.event === 'PayerDisputed' || e.event === 'PayerAttested') {
        await this.recordPayerEvent(e);
        return;
      }
      // The deployment's own events (EscrowFunded, PaymentSettled, PayerAttested) are recorded from its receipt.
      const spec = DEPOSIT_OUTFLOW_EVENTS[e.event];
      if (!spec) return;
      const paymentId = await this.store.paymentOf(e.contract);
      const token = e.args['token'];
      const to = e.args[spec.to];
      const amount = e.args['amount'];
      if (!paymentId || token === undefined || to === undefined || amount === undefined) return;
      await this.store.addOutflow({
        observation_id: message.id,
        payment_id: paymentId,
        chain: e.chain,
        tx_hash: e.txHash,
        log_index: e.logIndex,
        block_number: e.blockNumber,
        block_hash: e.blockHash?.toLowerCase() ?? null,
        kind: spec.kind,
        token,
        recipient: to,
        amount,
      });
      this.wake();
      return;
    }
    if (message.type === 'ObservationRetracted.v1') {
      const r = message.data as RetractedObservation;
      if (await this.retractOutflow(r.observationId)) return;
      await this.retractPayerLog(r, message.id);
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

  /**
   * The merchant's dispute of the payer (PayerDisputed: relayed by us, or by anyone with its signature) and the
   * admin's attestation of the right one (PayerAttested after a dispute; the deployment's own records nothing): the
   * payment's payer follows the deposit's logs in block order (`payer_status`). Recorded at the indexer's sighting
   * only, keyed per log and block; the indexer's retraction of the block undoes it (`retractPayerLog`).
   */
  private async recordPayerEvent(e: DepositEventObserved): Promise<void> {
    const paymentId = await this.store.paymentOf(e.contract);
    const payer = e.args['payer'];
    if (!paymentId || payer === undefined) return;
    const sighting: PayerLogSighting = {
      chain: e.chain,
      txHash: e.txHash,
      logIndex: e.logIndex,
      blockNumber: e.blockNumber,
      blockHash: e.blockHash?.toLowerCase() ?? '',
      kind: e.event === 'PayerDisputed' ? 'disputed' : 'attested',
      payer: getAddress(payer),
      finalAt: BigInt(e.args['finalAt'] ?? '0'),
    };
    await this.facts.append(paymentId, payerEventCommand(sighting), payerEventIdempotencyKey(sighting));
  }

  /**
   * A reorg took the block of a deposit contract's log: a payer log the payment recorded from it no longer counts
   * (RetractPayerLog; any other log of the deposit records nothing). Retractions published before they named the
   * watched address cannot be attributed and undo nothing here.
   */
  private async retractPayerLog(r: RetractedObservation, retractionId: string): Promise<void> {
    if (r.observationType !== 'PaymentDepositEventObserved.v1' || r.address === undefined) return;
    const paymentId = await this.store.paymentOf(r.address);
    if (!paymentId) return;
    await this.facts.append(
      paymentId,
      {
        type: 'RetractPayerLog',
        chain: r.chain,
        txHash: r.txHash,
        logIndex: r.logIndex,
        blockHash: r.blockHash,
      },
      `retract-payer:${retractionId}`,
    );
  }

  /**
   * An operator's re-scan of the payment's deposit (docs/chain-operator.md, "Re-scanning a deposit address"): the
   * outflow logs of the deposit contract in `fromBlock..toBlock`, read from the chain, as the indexer's watch of the
   * contract would have published them. One the payment holds is reported `already_recorded`; any other is queued
   * exactly as an indexer sighting is (payment_deposit_outflows), so the worker records it (RecordOutflow, keyed by
   * the log: one fact whichever path saw it) once its block has the chain's confirmations and is still the chain's
   * block. Its row's id names the chain, log and block: a second re-scan queues nothing new.
   */
  async rescanOutflows(
    paymentId: string,
    scan: { chain: string; address: string; fromBlock: number; toBlock: number },
  ): Promise<RescannedOutflow[]> {
    if (!this.contracts) return [];
    const seen = await this.contracts.outflowsBetween(scan.chain, scan.address, scan.fromBlock, scan.toBlock);
    const { state } = await this.facts.load(paymentId);
    const answers: RescannedOutflow[] = [];
    for (const o of seen) {
      // This log of this block: one the payment holds from a block a reorg took is the transaction mined again here.
      const recorded = outflowLogRecorded(state, o.txHash, o.logIndex, o.blockHash);
      if (!recorded) {
        await this.store.addOutflow({
          observation_id: `${RESCAN_OUTFLOW}${scan.chain}:${o.txHash}:${o.logIndex}:${o.blockHash}`,
          payment_id: paymentId,
          chain: scan.chain,
          tx_hash: o.txHash,
          log_index: o.logIndex,
          block_number: String(o.blockNumber),
          block_hash: o.blockHash,
          kind: o.kind,
          token: o.token,
          recipient: o.to,
          amount: o.amount.toString(),
        });
      }
      answers.push({
        txHash: o.txHash,
        logIndex: o.logIndex,
        blockNumber: o.blockNumber,
        blockHash: o.blockHash,
        kind: o.kind,
        token: o.token,
        to: o.to,
        amount: o.amount.toString(),
        status: recorded ? 'already_recorded' : 'queued',
      });
    }
    if (answers.some((a) => a.status === 'queued')) {
      this.logger.warn({
        msg: 'deposit re-scan found outflows the payment had not recorded; queued',
        paymentId,
        chain: scan.chain,
        txHashes: answers.filter((a) => a.status === 'queued').map((a) => a.txHash),
      });
      this.wake();
    }
    return answers;
  }

  /**
   * A reorg took back the block of an outflow observation (true when it was one). Not recorded yet: it never
   * happened. Recorded from our own action's receipt and not confirmed yet: a capture, refund or reclaim is undone
   * (PaymentOutflowRetracted.v1). Otherwise (a recover or rescue, or a reorg deeper than the chain's confirmations)
   * the payment keeps the fact and an operator is told; the transaction re-included elsewhere is a new observation
   * recorded as the same fact (or, after an undo, again).
   */
  private async retractOutflow(observationId: string): Promise<boolean> {
    const outflow = await this.store.outflow(observationId);
    if (!outflow) return false;
    if (outflow.state === 'retracted') return true;
    // Our own capture, refund, recover or rescue is recorded from its receipt at one confirmation, before this
    // sighting is due: the payment holds the fact although the row was never marked recorded here.
    const recorded =
      outflow.state === 'recorded' ||
      (await this.facts.load(outflow.payment_id)).state.outflowTxs.some(
        (tx) => tx.toLowerCase() === outflow.tx_hash.toLowerCase(),
      );
    // Our own capture, refund or reclaim not confirmed yet: the payment undoes it (the escrow holds it again; the
    // log mined again is recorded again). Nothing was announced: the webhook waits for the confirmations. Before the
    // row is marked, so a crash in between redoes it (keyed by the sighting). A row the worker recorded was
    // confirmed with it: a deeper reorg, which the payment keeps.
    const undone =
      recorded &&
      outflow.state !== 'recorded' &&
      (
        await this.facts.append(
          outflow.payment_id,
          { type: 'RetractOutflow', txHash: outflow.tx_hash.toLowerCase(), logIndex: outflow.log_index },
          `retract-outflow:${observationId}`,
        )
      ).newEvents.length > 0;
    await this.store.markOutflow(observationId, 'retracted');
    const entry = {
      paymentId: outflow.payment_id,
      chain: outflow.chain,
      txHash: outflow.tx_hash,
      kind: outflow.kind,
    };
    if (undone) {
      this.logger.warn({
        msg: 'deposit outflow retracted by a reorg before its confirmations; undone',
        ...entry,
      });
    } else if (recorded) {
      this.metrics.outflowsRetractedAfterRecord.inc({ chain: outflow.chain, kind: outflow.kind });
      this.logger.error({
        msg: 'a recorded deposit outflow was retracted by a reorg; the payment keeps it: check the deposit',
        recordedBy: outflow.state === 'recorded' ? 'deposit worker' : "the action's own receipt",
        ...entry,
      });
    } else {
      this.logger.warn({ msg: 'deposit outflow retracted by a reorg before it was recorded', ...entry });
    }
    return true;
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
    const { state, mode } = await this.facts.load(paymentId);
    const created = state.created;
    if (!created) return;
    try {
      if (state.flagged) {
        if (await this.skipOtherMode(paymentId, state, mode, 'flag')) return;
        return await this.flagOnChain(paymentId, state);
      }
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
      const recorded = deploymentToVerify(state);
      if (recorded) {
        // A reorg failed the payment after its deploy was recorded: the deploy, mined after the lost funding, went
        // with it, and on the new fork it landed again (funded first) or not (reverted, dropped). Not there:
        // undone, and the deposit's funds are deployed NONE and returned to the payer. There: the payment is
        // reinstated once the deploy has its confirmations there and the funding confirmed there covers the order.
        if (await this.contracts.isDeployed(recorded.chain, created.depositAddress)) {
          await this.reinstateAtConfirmations(paymentId, recorded);
        } else {
          this.logger.warn({
            msg: 'deposit deployment lost to a reorg: not on the chain any more',
            paymentId,
            chain: recorded.chain,
            deployTxHash: recorded.txHash,
          });
          await this.recordDeployment.lost(paymentId, recorded.txHash);
        }
        if (fromTimer) await this.store.clearRetry(paymentId);
        return;
      }
      // A failed payment is deployed only NONE (a reorg failed it; what its deposit holds goes back to the payer).
      if (
        state.deployRequested &&
        !state.deployment &&
        (state.phase !== 'failed' || state.deployMethod === 'NONE')
      ) {
        if (await this.skipOtherMode(paymentId, state, mode, 'deploy')) return;
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

  /**
   * The recorded deploy of a payment a reorg failed is on the new fork: reinstated (merchants told payment.settled /
   * payment.escrow_confirmed) only once its block there has the chain's confirmations, as the first deploy was
   * announced, never at the head. That block is queued as a receipt (`deploy:<tx>:<block hash>`) whose confirmation
   * by the worker (ConfirmDeployment) reinstates the payment if the funding confirmed on the new fork covers the order
   * by then; funding confirmed later finds the receipt confirmed here (RecordDeploymentFound).
   */
  private async reinstateAtConfirmations(
    paymentId: string,
    recorded: { txHash: string; chain: string },
  ): Promise<void> {
    const set = this.relayers.set;
    if (!set) throw new Error('no chain provider to read the recorded deploy of a payment a reorg failed');
    const receipt = await set.for(recorded.chain).provider.getTransactionReceipt(recorded.txHash);
    // Thrown, so the step is retried: a node behind the one that mined it answers later.
    if (!receipt || receipt.status !== 1)
      throw new Error(`the deposit is deployed but no receipt of the recorded deploy ${recorded.txHash} yet`);
    const receiptId = `deploy:${recorded.txHash.toLowerCase()}:${receipt.blockHash.toLowerCase()}`;
    await this.store.addReceipt({
      receipt_id: receiptId,
      payment_id: paymentId,
      chain: recorded.chain,
      tx_hash: recorded.txHash,
      log_index: null,
      kind: 'deployed',
      block_number: String(receipt.blockNumber),
      block_hash: receipt.blockHash,
    });
    if ((await this.store.receiptState(receiptId)) === 'confirmed')
      await this.recordDeployment.found(paymentId, recorded.txHash, receipt.blockHash);
    else this.wake();
  }

  /**
   * True (and the step not taken) for a payment of the other mode than this deployment's chains, recorded before
   * checkouts were refused to such merchants: its deposit address was handed out on chains that are not its
   * merchant's, so the operator key neither deploys it (which would bind and forward the funds on the wrong chain)
   * nor flags it there. The funds stay in the deposit address; the payment says why (`deploy_hold_reason`
   * `chain_mode_mismatch`), an error log and stablepay_payment_deposit_chain_mode_skips_total tell the operator,
   * and no retry is scheduled (a deployment's mode changes only with its configuration). What the chain shows
   * (transfers in, their confirmations, screening) is still recorded.
   */
  private async skipOtherMode(
    paymentId: string,
    state: PaymentState,
    mode: 'live' | 'test',
    step: 'deploy' | 'flag',
  ): Promise<boolean> {
    if (mode === this.config.mode) return false;
    await this.store.clearRetry(paymentId);
    // Said once: every later event of the payment comes back here and finds its hold recorded.
    if (step === 'deploy' && state.deployHold?.reason === 'chain_mode_mismatch') return true;
    const created = state.created;
    const asset = paymentAsset(state);
    const chain =
      created?.acceptedAssets.find((a) => a.asset === asset)?.chain ??
      created?.acceptedAssets[0]?.chain ??
      '';
    this.metrics.chainModeSkips.inc({ chain, step });
    this.logger.error({
      msg: `deposit ${step} skipped: the payment's mode is not this deployment's chains' mode`,
      paymentId,
      merchantId: created?.merchantId,
      paymentMode: mode,
      chainMode: this.config.mode,
      chain,
    });
    if (step === 'deploy') await this.recordHold.handle(paymentId, chain, 'chain_mode_mismatch');
    return true;
  }

  private async deploy(paymentId: string, state: PaymentState): Promise<void> {
    const created = state.created;
    if (!created || !this.contracts) return;
    const stored = await this.events.readStream(paymentStreamId(paymentId));
    const requested = [...stored].reverse().find((e) => e.type === 'PaymentDeployRequested.v1')?.data as
      PaymentDeployRequested['data'] | undefined;
    if (!requested) return;
    if (requested.method !== 'NONE') {
      const mismatch = await this.registryMismatch(requested.chain, created.merchantId);
      if (mismatch) {
        // The deploy would bind the deposit to (and DIRECT forward the order to) what the registry holds, which
        // is not what the merchant has told us: nothing moves until the two agree again.
        this.metrics.registryMismatches.inc({ chain: requested.chain });
        this.logger.error({
          msg: 'deposit deploy held: the registry merchant record differs from the service record',
          paymentId,
          merchantId: created.merchantId,
          chain: requested.chain,
          ...mismatch,
        });
        // Shown on the payment (deploy_hold_reason): the merchant is the one who can end the hold.
        await this.recordHold.handle(
          paymentId,
          requested.chain,
          /^0x0{40}$/i.test(mismatch.onChain.signer) ? 'merchant_not_registered' : 'merchant_change_pending',
        );
        await this.retryLater(
          paymentId,
          await this.store.attempts(paymentId),
          `registry merchant record differs from the service record on ${requested.chain}`,
        );
        return;
      }
    }
    // Minted funds name no payer (a bridge's relayer sent the mint): the contract takes no zero payer, and one
    // attested stands after the challenge period for refund, reclaim (anyone calls it) and recover, so the deploy
    // attests the one address the merchant is known to control; the merchant returns the funds to its customer.
    let payer = requested.payer;
    if (requested.payerUnknown === true) {
      const settlement = (await this.merchants.get(created.merchantId)).settlementAddress;
      if (settlement === null) {
        await this.retryLater(
          paymentId,
          await this.store.attempts(paymentId),
          'minted funds name no payer and the merchant has no settlement address to attest instead',
        );
        return;
      }
      payer = settlement;
    }
    const outcome = await this.contracts.deploy({
      chain: requested.chain,
      merchantId: created.merchantId,
      onChainPaymentId: created.onChainId,
      depositAddress: created.depositAddress,
      method: requested.method,
      token: parseCaip19(requested.asset).address,
      payer,
      amount: BigInt(requested.amount),
      authorizationPeriodSeconds: created.authorizationPeriodSeconds,
      fundedFromBlock: earliestBlock(state.transfers.filter((t) => t.chain === requested.chain)),
    });
    if (outcome.kind === 'retry') {
      await this.retryLater(paymentId, await this.store.attempts(paymentId), outcome.error);
      return;
    }
    await this.recordDeployment.handle(paymentId, {
      txHash: outcome.txHash,
      chain: requested.chain,
      method: outcome.method,
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
      method: outcome.method,
      txHash: outcome.txHash,
    });
  }

  /**
   * Null when the chain's registry holds the merchant's signer and settlement address as the merchants scope
   * records them, else both sides (the threat model: a registry changed behind the merchant's back must not
   * receive a deposit's funds).
   */
  private async registryMismatch(
    chain: string,
    merchantId: string,
  ): Promise<{
    onChain: { signer: string; settlement: string };
    record: Record<string, string | null>;
  } | null> {
    if (!this.contracts) return null;
    const [onChain, profile] = await Promise.all([
      this.contracts.merchantOnChain(chain, merchantId),
      this.merchants.get(merchantId),
    ]);
    const same = (a: string, b: string | null) => b !== null && a.toLowerCase() === b.toLowerCase();
    if (same(onChain.signer, profile.merchantSigner) && same(onChain.settlement, profile.settlementAddress))
      return null;
    return { onChain, record: { signer: profile.merchantSigner, settlement: profile.settlementAddress } };
  }

  private async flagOnChain(paymentId: string, state: PaymentState): Promise<void> {
    const created = state.created;
    if (!created || !this.contracts) return;
    const chains = [...new Set(created.acceptedAssets.map((a) => a.chain))].filter((c) =>
      this.config.chains.some((k) => k.caip2 === c),
    );
    for (const chain of chains) {
      const result = await this.contracts.flag(
        chain,
        created.merchantId,
        created.onChainId,
        created.depositAddress,
      );
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
    if (this.ticking) this.wokenDuringTick = true;
    else this.schedule(0);
  }

  private schedule(ms = TICK_MS): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.wokenDuringTick = false;
      this.ticking = this.watchedTick().finally(() => {
        this.ticking = undefined;
        this.schedule(this.wokenDuringTick ? 0 : TICK_MS);
      });
    }, ms);
    this.timer.unref();
  }

  /** A pass that takes too long is reported while it runs, so a stuck dependency is seen, not just felt. */
  private async watchedTick(): Promise<void> {
    const started = Date.now();
    const watchdog = setTimeout(() => {
      this.metrics.stalls.inc();
      this.logger.error({ msg: 'deposit worker pass stalled', runningMs: Date.now() - started });
    }, STALL_AFTER_MS);
    watchdog.unref();
    try {
      await this.tick();
    } finally {
      clearTimeout(watchdog);
      this.metrics.passSeconds.observe((Date.now() - started) / 1000);
    }
  }

  private async tick(): Promise<void> {
    try {
      await this.confirmTransfers();
      // Backoff timers run in wall time against the injected clock's "now" (a test clock makes them due at once).
      // Started, not awaited: a deploy waits for its receipt, and confirmations of every other payment must not.
      for (const paymentId of await this.store.dueRetries(
        new Date(Math.max(Date.now(), this.clock.now().getTime())),
      )) {
        if (this.inFlight.has(paymentId)) continue; // its running step reschedules or clears the retry
        this.advance(paymentId, true).catch((error: unknown) =>
          this.logger.error({ msg: 'payment deposit retry failed', paymentId, error: String(error) }),
        );
      }
    } catch (error) {
      this.logger.error({ msg: 'deposit worker failed, will retry', error: String(error) });
    }
  }

  /**
   * One pass of confirmations on every chain (the worker's timer runs it; tests call it). Each chain on its own: one
   * chain's node being slow or down does not hold another chain's confirmations.
   */
  async confirmTransfers(): Promise<void> {
    const set = this.relayers.set;
    if (!set) return;
    await Promise.all(
      this.config.chains.map((chain) =>
        this.confirmChain(set.for(chain.caip2).provider, chain.caip2, chain.confirmations).catch(
          (error: unknown) =>
            this.logger.error({
              msg: 'deposit confirmations failed, will retry',
              chain: chain.caip2,
              error: String(error),
            }),
        ),
      ),
    );
  }

  private async confirmChain(provider: ChainReader, chain: string, confirmations: number): Promise<void> {
    let head: number;
    try {
      head = await this.withDeadline(provider.getBlockNumber(), chain);
    } catch (error) {
      this.chainHealth?.failed(chain, error);
      throw error;
    }
    this.chainHealth?.answered(chain, head);
    const through = head - confirmations + 1;
    const onChain = canonicalBlocks((n) =>
      this.withDeadline(provider.getBlock(n), chain, 'eth_getBlockByNumber'),
    );
    for (const t of await this.store.open(chain, through)) {
      if (!(await this.stillCanonical(onChain, t, 'deposit transfer'))) continue;
      const transfer = { chain: t.chain, txHash: t.tx_hash, logIndex: t.log_index };
      const { state } = await this.confirm.handle(t.payment_id, transfer, t.observation_id);
      const recorded = state.transfers.find(sameTransfer(transfer));
      if (recorded?.confirmed) {
        await this.store.mark(t.observation_id, 'confirmed');
        continue;
      }
      // Not (or no longer) recorded by the payment: kept in the queue, so the confirmation lands once it is.
      if (!this.unrecordedWarned.has(t.observation_id)) {
        this.unrecordedWarned.add(t.observation_id);
        this.logger.warn({
          msg: 'deposit transfer confirmable but not recorded by its payment; kept queued',
          paymentId: t.payment_id,
          chain,
          txHash: t.tx_hash,
        });
      }
    }
    const transactions = transactionsOnce(provider);
    for (const r of await this.store.openReceipts(chain, through)) {
      await this.checkReceipt(transactions, onChain, r, through);
    }
    for (const o of await this.store.openOutflows(chain, through)) {
      if (!(await this.stillCanonical(onChain, o, 'deposit outflow'))) {
        // A re-scan's row gets no retraction from the indexer: its block gone, it never happened (the log mined
        // again elsewhere is found by the next re-scan, or seen by the indexer, under its new block).
        if (o.observation_id.startsWith(RESCAN_OUTFLOW) && (await onChain(o.block_number)) !== null)
          await this.store.markOutflow(o.observation_id, 'retracted');
        continue;
      }
      await this.recordOutflow.handle(o.payment_id, {
        kind: o.kind,
        chain: o.chain,
        txHash: o.tx_hash,
        logIndex: o.log_index,
        blockHash: o.block_hash,
        token: o.token,
        to: o.recipient,
        amount: o.amount,
      });
      await this.store.markOutflow(o.observation_id, 'recorded');
    }
  }

  /**
   * A transaction the payment recorded from a receipt, due by depth. Its block still the chain's at that height: the
   * deploy (ConfirmDeployment: payment.settled / payment.escrow_confirmed) or the outflow (ConfirmOutflow) is
   * announced. Taken back: the transaction mined again in a canonical block is followed there and checked again at
   * that block's depth, where a deploy is confirmed and an outflow left to the indexer's sighting there (a second
   * shallow reorg may take that block back too, before the indexer read it); still pending in the node's pool, it is
   * waited for; otherwise it is on no chain, and a capture,
   * refund or reclaim is undone (RetractOutflow of the block the payment recorded it from, keyed by the receipt, as the
   * indexer's retraction undoes one; a recover or rescue is paged as a recorded outflow retracted). A deploy on no chain
   * is undone (RecordDeploymentLost) and deployed again (deployLost). No block at that height (a node behind) decides
   * nothing.
   */
  private async checkReceipt(
    provider: ChainReader,
    onChain: (blockNumber: string) => Promise<string | null>,
    r: RecordedReceipt,
    through: number,
  ): Promise<void> {
    const canonical = await onChain(r.block_number);
    if (canonical === null) return this.undecided(r, 'no_block');
    if (canonical.toLowerCase() === r.block_hash.toLowerCase()) {
      if (r.kind !== 'deployed' && minedAgain(r)) {
        // An outflow mined again is the indexer's to see there (recorded once, confirmed at its depth, or the record
        // taken back first undone and redone): confirming or undoing it from here would race that retraction. Only
        // now, its new block deep enough: before, a reorg could take that block back unread by the indexer.
        await this.store.markReceipt(r.receipt_id, 'mined_again');
        return;
      }
      await this.confirmReceipt(r);
      await this.store.markReceipt(r.receipt_id, 'confirmed');
      return;
    }
    const receipt = await this.withDeadline(
      provider.getTransactionReceipt(r.tx_hash),
      r.chain,
      'eth_getTransactionReceipt',
    );
    const entry = { paymentId: r.payment_id, chain: r.chain, txHash: r.tx_hash, kind: r.kind };
    if (receipt && receipt.status === 1) {
      const its = await onChain(String(receipt.blockNumber));
      if (its === null || its.toLowerCase() !== receipt.blockHash.toLowerCase()) return;
      // The deployment's own logs are not recorded from the indexer: its confirmation is counted at the new block.
      // An outflow's are (the indexer's sighting, above), but only once that block is deep enough: until then a second
      // reorg may take it back unread by the indexer, the transaction dropped. Kept open either way.
      if (r.kind === 'deployed' && r.block_hash === UNPLACED_BLOCK)
        await this.watchPlacedDeposit(r, receipt.blockNumber);
      await this.store.followReceipt(r.receipt_id, receipt.blockNumber, receipt.blockHash);
      this.logger.warn({
        msg:
          r.block_hash === UNPLACED_BLOCK
            ? 'deposit deploy queued by a process that does not read its chain found in its block; its confirmations are counted there'
            : 'deposit transaction recorded from its receipt mined again in another block after a reorg; its confirmations are counted there',
        ...entry,
        blockNumber: receipt.blockNumber,
      });
      if (receipt.blockNumber <= through)
        await this.checkReceipt(
          provider,
          onChain,
          {
            ...r,
            block_number: String(receipt.blockNumber),
            block_hash: receipt.blockHash.toLowerCase(),
            recorded_block_hash: recordedBlock(r),
          },
          through,
        );
      return;
    }
    if (!receipt) {
      const pending = await this.withDeadline(
        provider.getTransaction(r.tx_hash),
        r.chain,
        'eth_getTransactionByHash',
      );
      // Back in the node's pool: mined again soon, and followed then (or pending for good: reported).
      if (pending) return this.undecided(r, 'pending');
    }
    if (r.kind === 'deployed') {
      // One reading on no chain is not a loss: another node's pool, or geth re-adding what a reorg dropped, may still
      // mine it, and a deploy undone that is then mined forwards the funds of a payment left pending. Lost only once
      // undecided across passes for the grace (the first such reading starts it).
      const seconds = r.undecided_seconds;
      if (seconds === undefined || seconds === null) return this.store.receiptUndecided(r.receipt_id);
      if (seconds < this.deployLostGraceS) return;
      await this.deployLost(r, entry);
      return;
    }
    await this.retractReceipt(r, entry);
  }

  /**
   * A deploy queued by a process that does not read its chain was never watched there (watchDeposit stops at the
   * queue): found in its block, the deposit contract is watched from it, or the payer's dispute and attestation logs
   * (recorded only from the indexer's sightings of the contract) and anyone else's capture or reclaim would never
   * reach the payment. Before the row is placed, so a crash in between registers it again (the indexer keeps the
   * first watch of an address).
   */
  private async watchPlacedDeposit(r: RecordedReceipt, blockNumber: number): Promise<void> {
    const { state } = await this.facts.load(r.payment_id);
    if (!state.created) return;
    await this.watches.watchContract({
      chain: r.chain,
      address: state.created.depositAddress,
      kind: 'payment_deposit',
      fromBlock: blockNumber,
    });
  }

  /**
   * A deploy taken back by a reorg before its confirmations and on no chain. The payment undoes it
   * (RecordDeploymentLost: PaymentDeploymentLost.v1): with its funding standing it is back to paid with its deploy
   * requested, and that fact brings it back to this flow through the bus, which deploys it again with the same
   * method to the same deterministic address (the funds are still there); a payment the reorg failed is returned to
   * its payer as before. Keyed by the deploy's transaction, as the failed payment's check is (one fact whichever
   * path finds it first), and recorded before the row is closed, so a crash in between redoes it. A capture or
   * refund recorded after the deploy is undone first by its own receipt's check: the row waits for it.
   */
  private async deployLost(
    r: RecordedReceipt,
    entry: { paymentId: string; chain: string; txHash: string; kind: string },
  ): Promise<void> {
    const { state, newEvents } = await this.recordDeployment.lost(r.payment_id, r.tx_hash);
    const kept = state.deployment?.txHash.toLowerCase() === r.tx_hash.toLowerCase();
    if (kept && Object.keys(state.unconfirmedEscrowMoves).length > 0) return;
    await this.store.markReceipt(r.receipt_id, 'lost');
    if (newEvents.length > 0) {
      this.metrics.deploysLost.inc({ chain: r.chain, outcome: 'undone' });
      this.logger.warn({
        msg:
          state.phase === 'failed'
            ? 'deposit deploy taken back by a reorg with the funding; undone, the deposit returned to the payer'
            : 'deposit deploy taken back by a reorg before its confirmations and not mined again; undone, deployed again',
        ...entry,
      });
    } else if (kept) {
      // A recover or rescue after it, or a fiat payout under way: the payment keeps a deployment on no chain.
      this.metrics.deploysLost.inc({ chain: r.chain, outcome: 'kept' });
      this.logger.error({
        msg: 'deposit deploy taken back by a reorg before its confirmations and not mined again; the payment keeps it: check the deposit',
        ...entry,
      });
    }
  }

  /**
   * The row stays open, undecided: it goes to the back of the chain's open receipts (DepositStore.openReceipts), and
   * one undecided for UNDECIDED_REPORT_AFTER_S (a transaction underpriced or with a nonce gap, never mined; a node
   * that has no block at that height) is logged and counted once: nothing announces or undoes it meanwhile.
   */
  private async undecided(r: RecordedReceipt, reason: 'pending' | 'no_block'): Promise<void> {
    const seconds = r.undecided_seconds;
    if (seconds === undefined || seconds === null) {
      await this.store.receiptUndecided(r.receipt_id);
      return;
    }
    if (seconds < UNDECIDED_REPORT_AFTER_S || this.undecidedReported.has(r.receipt_id)) return;
    this.undecidedReported.add(r.receipt_id);
    this.metrics.receiptsUndecided.inc({ chain: r.chain, kind: r.kind, reason });
    this.logger.error({
      msg:
        reason === 'pending'
          ? "recorded deposit transaction pending in the node's pool long after its confirmations were due: check it"
          : 'no block at the height of a recorded deposit transaction long after its confirmations were due: check the node',
      paymentId: r.payment_id,
      chain: r.chain,
      txHash: r.tx_hash,
      kind: r.kind,
      blockNumber: r.block_number,
      undecidedSeconds: Math.round(seconds),
    });
  }

  private async confirmReceipt(r: RecordedReceipt): Promise<void> {
    const txHash = r.tx_hash.toLowerCase();
    if (r.kind === 'deployed') {
      // Keyed by the row: `deploy:<tx>` for the deploy recorded, `deploy:<tx>:<block>` for it mined again on the
      // fork after a reorg failed the payment (its confirmation there reinstates it; the first key is spent).
      await this.facts.append(
        r.payment_id,
        { type: 'ConfirmDeployment', txHash },
        `confirmed:${r.receipt_id}`,
      );
      return;
    }
    const { state } = await this.facts.load(r.payment_id);
    const key = outflowRecordKey(state, txHash, r.log_index ?? 0, r.block_hash);
    // The key the worker's record of the same log confirms under: one confirmation whichever comes first.
    await this.facts.append(r.payment_id, { type: 'ConfirmOutflow', txHash }, `confirmed:${key}`);
  }

  private async retractReceipt(
    r: RecordedReceipt,
    entry: { paymentId: string; chain: string; txHash: string; kind: string },
  ): Promise<void> {
    const txHash = r.tx_hash.toLowerCase();
    const logIndex = r.log_index ?? 0;
    // The block the payment holds the record from, not one the transaction was mined again in and followed to: the
    // payment keeps a record of the log from another block (the indexer's sighting there), which stands.
    const blockHash = recordedBlock(r);
    const { state, newEvents } = await this.facts.append(
      r.payment_id,
      { type: 'RetractOutflow', txHash, logIndex, blockHash },
      `retract-outflow:receipt:${r.receipt_id}`,
    );
    await this.store.markReceipt(r.receipt_id, 'retracted');
    if (newEvents.length > 0) {
      this.logger.warn({
        msg: 'recorded deposit outflow taken back by a reorg the indexer never read, before its confirmations; undone',
        ...entry,
      });
      return;
    }
    // Still recorded from that block (a recover or rescue, which is never undone; a move whose fiat settlement went on).
    if (state.outflowSightings[`${txHash}#${logIndex}`]?.blockHash === blockHash) {
      this.metrics.outflowsRetractedAfterRecord.inc({ chain: r.chain, kind: r.kind });
      this.logger.error({
        msg: 'a recorded deposit outflow was retracted by a reorg; the payment keeps it: check the deposit',
        recordedBy: 'a receipt, its block never read by the indexer',
        ...entry,
      });
    }
  }

  /**
   * Deep enough is not enough: the block the indexer saw it in must still be the chain's block at that height. After
   * a reorg whose new fork is already deeper than the confirmations, the orphaned sighting is due by its number
   * before the indexer's retraction arrives; it stays queued, and the retraction marks it (the re-included log, if
   * any, is a new sighting). A row queued before block hashes were kept is judged by its depth alone, as before.
   */
  private async stillCanonical(
    onChain: (blockNumber: string) => Promise<string | null>,
    row: {
      observation_id: string;
      payment_id: string;
      chain: string;
      tx_hash: string;
      block_number: string;
      block_hash: string | null;
    },
    what: string,
  ): Promise<boolean> {
    if (!row.block_hash) return true;
    const canonical = await onChain(row.block_number);
    if (canonical !== null && canonical.toLowerCase() === row.block_hash.toLowerCase()) return true;
    if (!this.orphanWarned.has(row.observation_id)) {
      this.orphanWarned.add(row.observation_id);
      this.logger.warn({
        msg: `${what} due by depth but its block is no longer canonical; kept queued for the reorg's retraction`,
        paymentId: row.payment_id,
        chain: row.chain,
        txHash: row.tx_hash,
        blockNumber: row.block_number,
      });
    }
    return false;
  }

  private async withDeadline<T>(call: Promise<T>, chain: string, method = 'eth_blockNumber'): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.metrics.rpcDeadlines.inc({ chain });
        reject(new Error(`${method} on ${chain} did not answer within ${HEAD_DEADLINE_MS} ms`));
      }, HEAD_DEADLINE_MS);
    });
    call.catch(() => undefined); // answered after the deadline: nobody listens any more
    try {
      return await Promise.race([call, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** What the worker reads of a chain: its head, the hash of a block by number, a transaction and its receipt. */
interface ChainReader {
  getBlockNumber(): Promise<number>;
  getBlock(blockNumber: number): Promise<{ readonly hash: string | null } | null>;
  getTransactionReceipt(txHash: string): Promise<{
    readonly status: number | null;
    readonly blockNumber: number;
    readonly blockHash: string;
  } | null>;
  getTransaction(txHash: string): Promise<object | null>;
}

/** The block the payment recorded the transaction from (lowercase), wherever the row follows it since. */
const recordedBlock = (r: RecordedReceipt): string => (r.recorded_block_hash ?? r.block_hash).toLowerCase();

/** Followed to another block than the one the payment recorded it from (a reorg took that one back). */
const minedAgain = (r: RecordedReceipt): boolean => recordedBlock(r) !== r.block_hash.toLowerCase();

/** The chain's block hash at each height asked, read once per worker pass (several rows share a block). */
function canonicalBlocks(getBlock: ChainReader['getBlock']): (blockNumber: string) => Promise<string | null> {
  const seen = new Map<string, Promise<string | null>>();
  return (blockNumber) => {
    let hash = seen.get(blockNumber);
    if (!hash) {
      hash = getBlock(Number(blockNumber)).then((b) => b?.hash ?? null);
      seen.set(blockNumber, hash);
    }
    return hash;
  };
}

/** The chain's answers about each transaction asked, read once per worker pass (several receipt rows share one). */
function transactionsOnce(provider: ChainReader): ChainReader {
  const once = <T>(seen: Map<string, Promise<T>>, txHash: string, read: () => Promise<T>): Promise<T> => {
    const key = txHash.toLowerCase();
    const known = seen.get(key);
    if (known) return known;
    const answer = read();
    seen.set(key, answer);
    return answer;
  };
  const receipts = new Map<string, ReturnType<ChainReader['getTransactionReceipt']>>();
  const pooled = new Map<string, ReturnType<ChainReader['getTransaction']>>();
  return {
    getBlockNumber: () => provider.getBlockNumber(),
    getBlock: (blockNumber) => provider.getBlock(blockNumber),
    getTransactionReceipt: (txHash) => once(receipts, txHash, () => provider.getTransactionReceipt(txHash)),
    getTransaction: (txHash) => once(pooled, txHash, () => provider.getTransaction(txHash)),
  };
}

/** The lowest block of the transfers recorded into a deposit address (null when none is). */
function earliestBlock(transfers: readonly { readonly blockNumber: string }[]): number | null {
  const blocks = transfers.map((t) => Number(t.blockNumber)).filter((b) => Number.isSafeInteger(b));
  return blocks.length > 0 ? Math.min(...blocks) : null;
}
