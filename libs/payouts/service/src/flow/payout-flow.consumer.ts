import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  Optional,
} from '@nestjs/common';
import {
  type BusMessage,
  type BusSubscription,
  EVENT_BUS,
  type EventBus,
  OutageGrace,
} from '@stablepay/event-bus';
import { EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import { SANCTIONS_SCREENING, type SanctionsScreening, SCREENING_OUTAGE_GRACE_MS } from '@stablepay/evm';
import {
  beneficiaryDecider,
  beneficiaryStreamId,
  type BeneficiaryState,
  CUSTOMER_CATEGORY,
  customerStreamId,
  HELD_FAILURE_REASONS,
  type PayoutDeposit,
  type PayoutRefundWithheldReason,
  payoutStreamId,
  refundWithheldReason,
} from '@stablepay/payouts-domain';
import { DomainError } from '@stablepay/util';
import { PayoutsAggregates, type Owner } from '../aggregates';
import { BankAccountVault } from '../bank-accounts';
import { KYC_PROVIDER, type KycProvider } from '../providers/kyc-provider';
import { OFF_RAMP_PROVIDER, type OffRampProvider, type OffRampTransferRequest } from '../providers/off-ramp';
import { CUSTOMER_TOPIC, foldCustomer, foldPayout, PAYOUT_TOPIC } from '../read-model/objects';
import { PAYOUT_SWEEPER, type PayoutSweeper } from './payout-sweep';
import { flagRefundWithheld, flagRetractedAfterSweep, flagSweepUnresolved } from './retracted-after-sweep';

export const PAYOUT_FLOW_GROUP = 'payouts.payout-flow';

/**
 * The payout process manager (docs/payouts.md, "Flow"): each payout fact drives the next step, through the ports.
 * - PayoutDepositDetected: a deposit at an address this deployment cannot sweep (an older factory's, another
 *   off-ramp's) fails the payout `deposit_address_retired`; otherwise the sender is screened (a match fails the payout `sender_flagged`), the customer is
 *   rechecked (no longer active fails it `customer_not_active`; funds held), then the operator
 *   sweeps the deposit address to the off-ramp on chain (PayoutSweeper; where the chain layer configures payouts),
 *   and only then is the off-ramp asked to pay out (PayoutForwarded with the sweep's transaction).
 * - PayoutForwarded: the off-ramp's report completes or fails the payout (pending: the message is retried with the
 *   bus's backoff until it reports).
 * - PayoutFailed: the funds go back to the wallet they came from (PayoutRefunded); not a flagged sender's.
 * - PayoutSweepOrphaned, PayoutDepositReincluded: a reorg orphaned the sweep with the deposit; it is found again on
 *   the new fork, or redone once the deposit is there again (PayoutDepositSwept).
 * - CustomerActivated: the KYC provider's ongoing monitoring may suspend the customer.
 * Every step appends with a key derived from the fact it follows, so a redelivered message appends nothing twice; a
 * provider that fails leaves the message to the bus's retry (nothing is skipped).
 */
@Injectable()
export class PayoutFlowConsumer implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(PAYOUT_FLOW_GROUP);
  private subscription: BusSubscription | undefined;
  /** SCREENING_OUTAGE_GRACE_MS; a test may shorten it. */
  readonly screeningOutage = new OutageGrace(SCREENING_OUTAGE_GRACE_MS);

  constructor(
    @Inject(EVENT_BUS) private readonly bus: EventBus,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(PayoutsAggregates) private readonly aggregates: PayoutsAggregates,
    @Inject(OFF_RAMP_PROVIDER) private readonly offRamp: OffRampProvider,
    @Inject(KYC_PROVIDER) private readonly kyc: KycProvider,
    @Inject(SANCTIONS_SCREENING) private readonly screening: SanctionsScreening,
    @Inject(BankAccountVault) private readonly accounts: BankAccountVault,
    @Optional() @Inject(PAYOUT_SWEEPER) private readonly sweeper?: PayoutSweeper | null,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.subscription = await this.bus.consume({
      group: PAYOUT_FLOW_GROUP,
      topics: [PAYOUT_TOPIC, CUSTOMER_TOPIC],
      handler: (message) => this.handle(message),
      onError: (error, message) =>
        this.logger.error({
          msg: 'payout flow step failed, will retry',
          messageId: message.id,
          error: String(error),
        }),
    });
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.subscription?.stop();
  }

  async caughtUp(): Promise<void> {
    await this.subscription?.caughtUp();
  }

  async handle(message: BusMessage): Promise<void> {
    const merchantId = message.metadata.merchantId;
    const mode = message.metadata.mode;
    if (typeof merchantId !== 'string' || (mode !== 'test' && mode !== 'live'))
      throw new Error(`event ${message.id} of ${message.key} has no merchantId/mode metadata`);
    const owner: Owner = { merchantId, mode };
    const id = message.key.slice(message.key.indexOf('-') + 1);
    if (message.key.startsWith(`${CUSTOMER_CATEGORY}-`)) {
      if (message.type === 'CustomerActivated.v1') await this.monitor(id, owner, message);
      return;
    }
    const step = `${message.type}:${message.id}`;
    switch (message.type) {
      case 'PayoutDepositDetected.v1':
        return this.forward(id, owner, step, message.data as PayoutDeposit | undefined);
      case 'PayoutForwarded.v1':
        return this.settle(id, owner, step);
      case 'PayoutFailed.v1':
        return this.refund(id, owner, step);
      case 'PayoutSweepOrphaned.v1':
        return this.resweep(id, owner, step, false);
      case 'PayoutDepositReincluded.v1':
        return this.resweep(id, owner, step, true);
      default:
        return;
    }
  }

  private async monitor(customerId: string, owner: Owner, message: BusMessage): Promise<void> {
    const state = foldCustomer(await this.store.readStream(message.key));
    const verdict = await this.kyc.monitor({
      customerId,
      type: state.customerType,
      name: state.name,
      email: state.email,
      resubmission: false,
    });
    if (!verdict.suspend) return;
    await this.aggregates.customer(
      customerId,
      owner,
      { type: 'SuspendCustomer', reason: verdict.reason, now: this.aggregates.now() },
      `suspend:${message.id}`,
    );
  }

  /** The payout as stored and what the off-ramp needs of it (its beneficiary's bank account, opened from the vault). */
  private async transferRequest(payoutId: string): Promise<{
    payout: ReturnType<typeof foldPayout>;
    request: OffRampTransferRequest;
  }> {
    const payout = foldPayout(await this.store.readStream(`payout-${payoutId}`));
    const beneficiary = (await this.store.readStream(beneficiaryStreamId(payout.beneficiaryId))).reduce(
      (s, e) => beneficiaryDecider.evolve(s, e as Parameters<typeof beneficiaryDecider.evolve>[1]),
      beneficiaryDecider.initialState(),
    ) as BeneficiaryState;
    return {
      payout,
      request: {
        payoutId,
        chain: payout.token.chain,
        token: payout.token.symbol,
        tokenDecimals: payout.token.decimals,
        amount: payout.deposit?.amount ?? payout.amount,
        currency: payout.currency,
        beneficiary: {
          holderName: beneficiary.holderName,
          account: await this.accounts.account(payout.beneficiaryId),
        },
      },
    };
  }

  private async forward(
    payoutId: string,
    owner: Owner,
    step: string,
    detected: PayoutDeposit | undefined,
  ): Promise<void> {
    const { payout, request } = await this.transferRequest(payoutId);
    if (payout.status !== 'deposit_detected' || !payout.deposit) {
      if (payout.status === 'awaiting_deposit' && detected)
        await this.sweptThenRetracted(payout, owner, detected);
      return;
    }
    // A reorg orphaned the recorded sweep with the deposit: on the new fork the funds are not known to be at the
    // off-ramp, and the deposit may never come back (a double spend). The off-ramp pays out fiat only once the sweep
    // is found or redone there (resweep goes on to it).
    if (payout.orphanedSweepTxHash !== null) return;
    // Its own sweep landed already (recorded, or on chain: the answer was lost, or the off-ramp refused the transfer
    // and the step is retried): the funds are at the off-ramp, judged clear before they moved. Screening, rechecking
    // or a retired-address check (PAYOUT_OFF_RAMP_ADDRESS rotated, a new factory since) could only fail the payout
    // as "held" while nothing is held.
    let forwardTxHash = payout.sweepTxHash;
    if (forwardTxHash === null) {
      const swept = this.sweeper ? await this.sweeper.swept(payout, owner.merchantId) : false;
      // Its sweep landed for an earlier deposit a reorg then retracted, and another transfer funds it now (not that
      // one re-included): the sweep took other funds held at the address, which this transfer makes up, so its
      // sender and the customer are judged as any deposit's before the payout goes on (a match holds this transfer).
      if (swept && fundedAfresh(await this.store.readStream(payoutStreamId(payoutId)), payout.deposit)) {
        if (!(await this.mayMove(payoutId, owner, step, payout.customerId, payout.deposit))) return;
      } else if (!swept) {
        // An address of an older factory or another off-ramp can never be swept from here: a terminal failure (funds
        // held there for the operator), not a sweep retried forever. A test-helper deposit moved nothing: it goes on.
        if (this.sweeper && !payout.deposit.simulated && this.sweeper.retired(payout, owner.merchantId)) {
          this.logger.warn({
            msg: 'payout deposit address retired: the payout fails, its funds stay there for the operator',
            payout: payoutId,
            depositAddress: payout.depositAddress,
          });
          await this.aggregates.payout(
            payoutId,
            owner,
            { type: 'RecordFailed', reason: 'deposit_address_retired', now: this.aggregates.now() },
            step,
          );
          return;
        }
        if (!(await this.mayMove(payoutId, owner, step, payout.customerId, payout.deposit))) return;
      }
      // The funds move before the off-ramp is asked to pay them out; a retry after a crash finds this sweep again.
      forwardTxHash = this.sweeper
        ? await this.sweeper.sweep(payout, owner.merchantId, this.sweepSent(payoutId, owner))
        : null;
      if (forwardTxHash !== null && !(await this.recordSwept(payoutId, owner, step, forwardTxHash))) return;
    }
    const { transferId } = await this.offRamp.submit(request);
    await this.aggregates.payout(
      payoutId,
      owner,
      { type: 'RecordForwarded', transferId, forwardTxHash, now: this.aggregates.now() },
      step,
    );
  }

  /**
   * The sweep landed: recorded before the off-ramp is asked, so a reorg retracting the deposit from now on is one
   * after the funds left (docs/payouts.md, "Reorgs"). False when the deposit was retracted while the sweep was in
   * flight: the funds left the address for a payout that has no deposit any more, counted and logged for the
   * operator as a retraction after the forward, and the off-ramp is not asked.
   */
  private async recordSwept(payoutId: string, owner: Owner, step: string, txHash: string): Promise<boolean> {
    try {
      await this.aggregates.payout(
        payoutId,
        owner,
        { type: 'RecordSwept', txHash, now: this.aggregates.now() },
        `swept:${step}`,
      );
      return true;
    } catch (error) {
      if (!(error instanceof DomainError && error.code === 'payout_state')) throw error;
      const payout = foldPayout(await this.store.readStream(payoutStreamId(payoutId)));
      if (payout.deposit) throw error;
      flagRetractedAfterSweep(this.logger, {
        payout: payoutId,
        status: payout.status,
        chain: payout.token.chain,
        sweepTxHash: txHash,
      });
      return false;
    }
  }

  /**
   * Records each signed sweep before it is broadcast (PayoutSweepSent.v1), keyed by its hash: a flow stopped after
   * the broadcast finds it in the node's pool on its retry. Refused once the deposit was retracted: nothing goes out.
   */
  private sweepSent(payoutId: string, owner: Owner) {
    return async (tx: { readonly txHash: string; readonly nonce: number }): Promise<void> => {
      await this.aggregates.payout(
        payoutId,
        owner,
        { type: 'RecordSweepSent', txHash: tx.txHash, nonce: tx.nonce, now: this.aggregates.now() },
        `sweep-sent:${tx.txHash}`,
      );
    };
  }

  /**
   * The deposit this step was for was retracted by a reorg before any sweep was recorded. A step that stopped (crash,
   * kill -9) after sending its sweep and is retried after the retraction finds the payout awaiting a deposit, where
   * the in-process step would have been refused recording the sweep and flagged it (recordSwept): the chain is asked
   * whether this payout's sweep is there (landed, or mined again on the new fork with other funds of the shared
   * address), and if so it is flagged the same way. The off-ramp is not asked either way.
   */
  private async sweptThenRetracted(
    payout: ReturnType<typeof foldPayout>,
    owner: Owner,
    detected: PayoutDeposit,
  ): Promise<void> {
    if (!this.sweeper || detected.simulated || payout.deposit || payout.sweepTxHash) return;
    const sweepTxHash = await this.sweeper.sweepOnChain(payout, owner.merchantId);
    if (sweepTxHash === null) {
      // Broadcast before the stop and still in a node's pool: mined, it would take other funds held at the address,
      // so it is replaced by a no-op at its nonce. The step is retried (then parked, and retried with back-off) until
      // the node holds neither (the no-op mined: nothing moved) or the sweep is mined after all, and flagged.
      const pending = await this.sweeper.sweepInFlight(payout);
      if (pending !== null) {
        const noop = await this.sweeper.cancelInFlight(payout, pending, detected.txHash);
        throw new Error(
          `payout ${payout.id}'s sweep ${pending} is still pending with its deposit retracted: ${
            noop === null
              ? 'retried until it is mined or dropped'
              : `replaced by the no-op ${noop} at its nonce`
          }`,
        );
      }
      return;
    }
    flagRetractedAfterSweep(this.logger, {
      payout: payout.id,
      status: payout.status,
      chain: payout.token.chain,
      sweepTxHash,
      depositTxHash: detected.txHash,
    });
  }

  /**
   * A reorg orphaned the payout's sweep with its deposit (docs/payouts.md, "Reorgs"). The sweep found canonical on
   * the new fork (the same transaction mined again, or another attempt of this payout) is recorded and nothing is
   * sent. Otherwise nothing of this payout left the address on this fork: once its deposit is observed there again
   * (`depositBack`, PayoutDepositReincluded) the sweep is redone, its simulation checking the address's balance;
   * before that the balance is other deposits' funds and nothing moves. The deposit sweeps a payout once, so should
   * the orphaned transaction still be mined, one of the two is refused on chain and the other found: never two sends.
   */
  private async resweep(payoutId: string, owner: Owner, step: string, depositBack: boolean): Promise<void> {
    const payout = foldPayout(await this.store.readStream(payoutStreamId(payoutId)));
    const orphaned = payout.orphanedSweepTxHash;
    if (!payout.deposit || !this.sweeper) return;
    if (orphaned !== null) {
      let txHash = await this.sweeper.sweptAgain(payout, orphaned, owner.merchantId);
      if (txHash === null && depositBack) {
        if (this.sweeper.retired(payout, owner.merchantId)) return this.unsweepable(payout, owner, step);
        txHash = await this.sweeper.sweep(payout, owner.merchantId, this.sweepSent(payoutId, owner));
      }
      if (txHash === null) return;
      await this.aggregates.payout(
        payoutId,
        owner,
        { type: 'RecordSwept', txHash, now: this.aggregates.now() },
        `reswept:${step}`,
      );
    }
    // A swept payout not forwarded yet, forwarded and not settled yet, or failed at the off-ramp and not refunded
    // yet, waited for its sweep to be canonical again (forward, settle, refund): it goes on now, also on a retry after
    // a crash once the sweep was recorded (the off-ramp's submit, status and refund are per payout).
    if (payout.status === 'deposit_detected') await this.forward(payoutId, owner, step, undefined);
    else if (payout.status === 'forwarded') await this.settle(payoutId, owner, step);
    else if (payout.status === 'failed') await this.refund(payoutId, owner, step);
  }

  /**
   * The orphaned sweep's deposit is back at an address this deployment no longer sweeps (PAYOUT_OFF_RAMP_ADDRESS
   * rotated, or a new factory, since the first sweep): redoing it would be refused for ever (docs/payouts.md,
   * "Retired deposit addresses"). A payout not forwarded yet fails `deposit_address_retired`, its funds held there
   * as any deposit at a retired address; one the off-ramp was asked about already keeps its state. Either way the
   * operator is told (counted, logged) and the step ends.
   */
  private async unsweepable(
    payout: ReturnType<typeof foldPayout>,
    owner: Owner,
    step: string,
  ): Promise<void> {
    flagSweepUnresolved(this.logger, {
      payout: payout.id,
      status: payout.status,
      chain: payout.token.chain,
      reason: 'deposit_address_retired',
      depositAddress: payout.depositAddress,
      orphanedSweepTxHash: payout.orphanedSweepTxHash,
    });
    if (payout.status !== 'deposit_detected') return;
    await this.aggregates.payout(
      payout.id,
      owner,
      { type: 'RecordFailed', reason: 'deposit_address_retired', now: this.aggregates.now() },
      step,
    );
  }

  /**
   * Before the deposit moves: its sender screened (a match fails the payout, funds held), the customer rechecked
   * from its own stream, and the payout read again. False when the payout must not be swept (now or anymore).
   */
  private async mayMove(
    payoutId: string,
    owner: Owner,
    step: string,
    customerId: string,
    deposit: { readonly from: string; readonly txHash: string },
  ): Promise<boolean> {
    const screened = await this.screening.screen([deposit.from]);
    // An outage for a bounded time, then parked (docs/payouts.md, "Flow"); never screened as clear.
    if (screened.kind === 'unreachable')
      throw this.screeningOutage.unavailable(
        step,
        `sanctions screening unreachable for payout ${payoutId}`,
        this.aggregates.now(),
      );
    this.screeningOutage.answered(step);
    if (screened.kind === 'match') {
      await this.aggregates.payout(
        payoutId,
        owner,
        { type: 'RecordFailed', reason: 'sender_flagged', now: this.aggregates.now() },
        step,
      );
      return false;
    }
    // Compliance: a customer suspended since the payout was created is not paid out. Its own stream, not the read
    // model, which may not show the suspension yet.
    const customer = foldCustomer(await this.store.readStream(customerStreamId(customerId)));
    const rechecked = await this.aggregates.payout(
      payoutId,
      owner,
      { type: 'RecheckCustomer', customerStatus: customer.status, now: this.aggregates.now() },
      `recheck:${step}`,
    );
    if (rechecked.changed) return false;
    // The screening can take long, and a reorg may retract the deposit meanwhile (docs/payouts.md, "Reorgs"): the
    // payout then has no deposit, and a sweep of its amount would take funds held at the shared address for others.
    const now = foldPayout(await this.store.readStream(`payout-${payoutId}`));
    return now.status === 'deposit_detected' && now.deposit?.txHash === deposit.txHash;
  }

  private async settle(payoutId: string, owner: Owner, step: string): Promise<void> {
    const { payout, request } = await this.transferRequest(payoutId);
    if (payout.status !== 'forwarded' || !payout.transferId) return;
    // A reorg orphaned the sweep that funded the transfer: on the new fork the off-ramp may hold nothing of it, and
    // the deposit may never come back. Its report (a completion: fiat for crypto it may never get; a failure: a
    // refund of the same) is not recorded until the sweep is found or redone there (resweep settles it then); the
    // payout stays forwarded, no payout.completed, and the operator was paged at the retraction.
    if (payout.orphanedSweepTxHash !== null) return;
    const status = await this.offRamp.status(payout.transferId, request);
    if (status.state === 'pending') throw new Error(`off-ramp transfer of payout ${payoutId} still pending`);
    const recorded = await this.aggregates.payout(
      payoutId,
      owner,
      status.state === 'completed'
        ? { type: 'RecordCompleted', fiatAmount: status.fiatAmount, now: this.aggregates.now() }
        : { type: 'RecordFailed', reason: status.reason, now: this.aggregates.now() },
      step,
    );
    // Counted with the failure that withholds the refund, once: a redelivered step appends nothing, and the refund
    // step (run again on every delivery of PayoutFailed, and by a resweep) does not count it again.
    if (status.state === 'failed' && recorded.changed) {
      const failed = foldPayout(await this.store.readStream(payoutStreamId(payoutId)));
      if (failed.refundWithheld) this.flagWithheld(failed, failed.refundWithheld.reason);
    }
  }

  private flagWithheld(payout: ReturnType<typeof foldPayout>, reason: PayoutRefundWithheldReason): void {
    if (!payout.deposit) return;
    flagRefundWithheld(this.logger, {
      payout: payout.id,
      chain: payout.token.chain,
      reason,
      minter: payout.deposit.from,
      amount: payout.deposit.amount,
      token: payout.token.symbol,
    });
  }

  private async refund(payoutId: string, owner: Owner, step: string): Promise<void> {
    const payout = foldPayout(await this.store.readStream(`payout-${payoutId}`));
    // Funds from a sanctioned wallet or of a suspended customer are held for compliance, never sent back.
    if (
      payout.status !== 'failed' ||
      !payout.deposit ||
      (payout.failureReason && HELD_FAILURE_REASONS.includes(payout.failureReason))
    )
      return;
    // The off-ramp returns what the sweep brought it: while a reorg left the sweep orphaned it may have nothing of
    // this payout on the new fork (the deposit may never come back), and would return crypto it never got.
    if (payout.orphanedSweepTxHash !== null) return;
    // A minted deposit's `from` sent the minting transaction (for a bridge, its relayer, anyone): returning the funds
    // there could pay a stranger. They stay with the off-ramp for the operator to return to a wallet the customer
    // names (docs/payouts.md, "Held funds"); the failure recorded it, and was counted when appended (settle).
    if (payout.refundWithheld) return;
    // A failure recorded before `refundWithheld` was kept was not counted when appended: it is here, on each delivery
    // (nothing of the stream tells a first one from a redelivery).
    const legacy = refundWithheldReason(payout);
    if (legacy) return this.flagWithheld(payout, legacy);
    const { reference } = await this.offRamp.refund({
      payoutId,
      to: payout.deposit.from,
      amount: payout.deposit.amount,
    });
    await this.aggregates.payout(
      payoutId,
      owner,
      {
        type: 'RecordRefunded',
        to: payout.deposit.from,
        amount: payout.deposit.amount,
        reference,
        now: this.aggregates.now(),
      },
      step,
    );
  }
}

/**
 * Whether `deposit` is a transfer the payout took after an earlier deposit was retracted, rather than that one
 * re-included (the same transaction): its sender was never screened for this payout.
 */
function fundedAfresh(
  history: ReadonlyArray<{ readonly type: string; readonly data: unknown }>,
  deposit: PayoutDeposit,
): boolean {
  const earlier = history
    .filter((e) => e.type === 'PayoutDepositDetected.v1')
    .slice(0, -1)
    .map((e) => (e.data as PayoutDeposit).txHash.toLowerCase());
  return earlier.length > 0 && !earlier.includes(deposit.txHash.toLowerCase());
}
