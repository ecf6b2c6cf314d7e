import { Inject, Injectable, Optional } from '@nestjs/common';
import { CLOCK, EVENT_STORE, deterministicEventId, loadAggregate } from '@stablepay/aggregate';
import {
  CHAIN_OPERATOR_CONFIG,
  type ChainOperatorConfig,
  assertChainModeServed,
  servedChainMode,
  type SupportedChains,
} from '@stablepay/chain-operator';
import type { EventStore, Mode } from '@stablepay/event-store';
import { formatCaip2, parseAddress, parseCaip2 } from '@stablepay/evm';
import {
  type PaymentState,
  assertPayerAttestable,
  decidePayment,
  dustRecoveryPending,
  paymentAsset,
  paymentStreamId,
} from '@stablepay/payments-domain';
import {
  outflowAsset,
  outflowRecordKey,
} from '../commands/record-deposit-outflow/record-deposit-outflow.handler';
import {
  type Clock,
  DomainError,
  bodyNotAnObject,
  cannotProcess,
  conflict,
  notFound,
  takesFields,
  unknownParameter,
} from '@stablepay/util';
import { ZeroAddress, getAddress } from 'ethers';
import { DataSource } from 'typeorm';
import type { DepositActionOutcome, DepositCall, DepositChain, DepositOutflow } from '../chain/deposit-chain';
import {
  PaymentCommands,
  type PaymentCommandWithoutTime,
  paymentDecider,
} from '../payments/payment.commands';
import { DepositStore } from '../deposits/deposit.store';
import { ACTION_SUBMISSIONS, type ActionSubmissions } from './action-submissions';
import { chainRejection } from './chain-rejections';
import {
  buildDisputePayer,
  buildSignedAction,
  contractsKeepingFunds,
  parseActionAmount,
  verifySignedAction,
  type PaymentSigningFacts,
  type SignedActionBody,
  type SignedActionKind,
} from './signed-action-preflight';

/** The deposit contracts of every supported chain, by CAIP-2 id (one relayer, the operator key, per chain). */
export interface DepositChains {
  for(caip2: string): DepositChain;
}
export const DEPOSIT_CHAINS = Symbol('DEPOSIT_CHAINS');

export interface ActionOwner {
  readonly merchantId: string;
  readonly mode: Mode;
}

/**
 * What an action answers: the payment stream's revision after it (the gateway waits for its read model there) and
 * the transaction. `submission`: `confirmed` (mined, its outflow recorded), `pending` (broadcast, receipt not in
 * time: the outflow is recorded when the transaction is observed), `requested` (a recover of dust: the request is
 * recorded and the deposit is being deployed for it; nothing sent, recover again once deployed).
 */
export interface ActionAnswer {
  readonly paymentId: string;
  readonly revision: number;
  readonly txHash: string | null;
  readonly submission: 'confirmed' | 'pending' | 'replayed' | 'requested';
}

interface Loaded {
  readonly state: PaymentState;
  readonly owner: ActionOwner;
  readonly paymentId: string;
  readonly revision: number;
  /** Ids of the requests already applied to the stream (their first event's id derives from the id). */
  readonly commandIds: { has(commandId: string): boolean };
  /** The type of the first event a request applied (which action a kept call belongs to). */
  readonly commandTypes: { get(commandId: string): string | undefined };
}

/**
 * The merchant's actions on a payment after its deposit, in the payments service (owner of `payment-<id>`):
 * capture, refund, rescue (merchant-signed, preflighted with the contract's own EIP-712 checks) and recover
 * (operator; destination derived). Each: the aggregate's rules first (state, flag, amounts: nothing read from the
 * chain for a refused request), then the signature against the chain's view (registry signer and epoch, chain
 * time, burned digests), then a simulation; only then the request fact is appended, the relayer submits, and the
 * receipt's outflow becomes the aggregate's fact (`PaymentCaptured.v1`, ... -> webhooks via the payment webhook
 * source). Actions on one payment run one at a time in this process.
 */
@Injectable()
export class PaymentActions {
  private readonly running = new Map<string, Promise<unknown>>();

  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(PaymentCommands) private readonly payments: PaymentCommands,
    @Inject(DEPOSIT_CHAINS) private readonly chains: DepositChains,
    @Inject(ACTION_SUBMISSIONS) private readonly submissions: ActionSubmissions,
    // Absent or without chains: no transaction can be sent at all, so no merchant's mode is out of place.
    @Optional()
    @Inject(CHAIN_OPERATOR_CONFIG)
    private readonly deployment?: Pick<SupportedChains, 'enabled' | 'mode'> &
      Partial<Pick<ChainOperatorConfig, 'addresses'>>,
    // The deposit worker's queue: absent, nothing wakes it (tests without a database).
    @Optional() @Inject(DataSource) dataSource?: DataSource,
  ) {
    this.depositJobs = dataSource ? new DepositStore(dataSource) : null;
  }

  private readonly depositJobs: DepositStore | null;

  capture(owner: ActionOwner, paymentId: string, body: SignedActionBody, commandId: string) {
    return this.signed('capture', owner, paymentId, body, commandId);
  }

  refund(owner: ActionOwner, paymentId: string, body: SignedActionBody, commandId: string) {
    return this.signed('refund', owner, paymentId, body, commandId);
  }

  rescue(owner: ActionOwner, paymentId: string, body: SignedActionBody, commandId: string) {
    return this.signed('rescue', owner, paymentId, body, commandId);
  }

  /**
   * Returns payer-owned funds to the payer attested on chain (never a supplied address): `recover` for the payment
   * token above the escrow (over-deposit, abandoned deposit, stragglers), or `reclaim` of a TWO_STEP escrow whose
   * authorization expired without a capture.
   */
  recover(owner: ActionOwner, paymentId: string, requestId: string): Promise<ActionAnswer> {
    return this.request(owner, paymentId, requestId, async (loaded, commandId) => {
      const { state } = loaded;
      // The contract checks the payer's challenge period and the escrow's authorization expiry against block time,
      // not the service clock: decide on the deposit chain's time (before a deployment nothing on chain is compared).
      const now = state.deployment ? await this.chainNow(state.deployment.chain) : this.clock.now();
      if (this.escrowReclaimable(state, now)) return this.reclaim(loaded);
      // The aggregate's rules (nothing to recover, not deployed, payer not final, flagged) before the chain.
      const decided = await this.screeningWoken(loaded, () =>
        decidePayment({ type: 'RequestRecover', now }, state),
      );
      const asksForDeploy = decided.some((e) => e.type === 'PaymentDustRecoveryRequested.v1');
      if (asksForDeploy || dustRecoveryPending(state)) {
        // Dust below the order's share waits for this request before the operator screens and deploys it: recorded
        // once per payment (whatever the Idempotency-Key), a repeat before the deploy is the same request. The
        // recover itself runs once the deposit is deployed and its payer final.
        const revision = asksForDeploy
          ? (await this.append(loaded, { type: 'RequestRecover' }, `${paymentId}:dust-recovery`, now))
              .revision
          : loaded.revision;
        return { paymentId: loaded.paymentId, revision, txHash: null, submission: 'requested' };
      }
      const { chain, deposit } = this.depositOf(state);
      const call = chain.recoverCall(deposit);
      await this.simulateOrRefuse(chain, call);
      await this.keep(loaded, call, commandId);
      const appended = await this.append(loaded, { type: 'RequestRecover' }, commandId, now);
      if (!appended.changed) return this.replayed(loaded.paymentId, appended.revision);
      return this.submitAndRecord(loaded, chain, call, commandId);
    });
  }

  /**
   * The merchant disputes the payer the deposit attests (its DisputePayer signature), within the payer's challenge
   * period: the relayer submits `disputePayer` and the receipt's PayerDisputed log clears the payer on the payment.
   * Refund, reclaim and recover then wait for the operator's attestation of the right payer (`payerAttestation`).
   */
  disputePayer(
    owner: ActionOwner,
    paymentId: string,
    body: SignedActionBody,
    requestId: string,
  ): Promise<ActionAnswer> {
    return this.request(owner, paymentId, requestId, async (loaded, commandId) => {
      const { state } = loaded;
      // The challenge period is judged by the deposit chain's time, as the contract judges it.
      const now = state.deployment ? await this.chainNow(state.deployment.chain) : this.clock.now();
      // A dispute already being relayed is refused here (409 payer_dispute_pending), before anything is read or sent.
      decidePayment({ type: 'RequestPayerDispute', now }, state);

      const { chain, deposit, facts } = this.depositOf(state);
      const record = await chain.readDeposit(deposit);
      if (!record.deployed) {
        throw conflict('deposit_not_deployed', 'The deposit contract is not deployed yet.');
      }
      const [auth, chainTime] = await Promise.all([chain.merchantAuth(record.merchantId), chain.chainTime()]);
      const action = buildDisputePayer(body, { ...facts, payer: record.payer }, auth.epoch);
      if (record.payerFinalAt !== 0n && chainTime >= record.payerFinalAt)
        throw chainRejection('PayerAlreadyFinal');
      verifySignedAction(action, { ...auth, chainTime }, await chain.signatureUsed(deposit, action.digest));
      const call = chain.disputePayerCall(deposit, {
        payer: action.message.payer,
        deadline: action.deadline,
        signature: action.signature,
      });
      await this.simulateOrRefuse(chain, call);
      await this.keep(loaded, call, commandId);
      const deadline = new Date(Number(action.deadline) * 1000);
      const appended = await this.append(loaded, { type: 'RequestPayerDispute', deadline }, commandId, now);
      if (!appended.changed) return this.replayed(loaded.paymentId, appended.revision);
      return this.submitAndRecord(loaded, chain, call, commandId, this.disputeFailed(loaded, commandId));
    });
  }

  /**
   * Our relay of a requested dispute was refused at the broadcast or reverted: nothing changed on chain, so the
   * request holds no new dispute back (else 409 `payer_dispute_pending` until the signature's deadline, which may
   * outlast the payer's challenge period). Recorded once under the attempt's own key; a no-op once the dispute's
   * log is recorded (the request is answered then).
   */
  private disputeFailed(loaded: Loaded, commandId: string): (txHash: string | null) => Promise<void> {
    return async (txHash) => {
      await this.append(loaded, { type: 'RecordPayerDisputeFailed', txHash }, `${commandId}:failed`);
    };
  }

  /**
   * The operator's attestation of the right payer after a merchant dispute (POST
   * /admin/merchants/:merchantId/payments/:id/payer-attestations). `attestPayer` passes only from the registry
   * admin's cold key, which never reaches a service: this checks the payment (another merchant's is 404; 409
   * `payer_not_disputed` while a payer stands, on the stream or on chain) and the address, and answers the call for
   * that key to sign and send. Nothing is sent or recorded here: the deposit's PayerAttested log, observed by the
   * indexer, records the payer (PaymentPayerAttested.v1).
   */
  async payerAttestation(
    merchantId: string,
    paymentId: string,
    body: unknown,
  ): Promise<{ chain: string; to: string; data: string; payer: string; admin: string }> {
    const loaded = await this.load(paymentId).catch((error: unknown) => {
      if (error instanceof DomainError && error.status === 404) throw notFound('payment', paymentId);
      throw error;
    });
    if (loaded.owner.merchantId !== merchantId) throw notFound('payment', paymentId);
    if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw bodyNotAnObject();
    }
    const { payer: sent, ...rest } = body as Record<string, unknown>;
    const unknown = Object.keys(rest)[0];
    if (unknown !== undefined) throw unknownParameter(unknown, takesFields(['payer']));
    const payer = parseAddress(sent, 'payer');
    assertPayerAttestable(loaded.state);
    const { chain, deposit, facts } = this.depositOf(loaded.state);
    if (payer === ZeroAddress || payer.toLowerCase() === deposit.toLowerCase()) {
      throw cannotProcess('invalid_payer', `${payer} cannot be the payer of this deposit.`, 'payer');
    }
    // Refunds, a reclaim and recover go to the payer: a token or Stablepay contract would keep them for good (the
    // rule settlement addresses and rescue destinations follow). Any other contract may be a payer's smart wallet.
    const keeper = contractsKeepingFunds(this.deployment?.addresses ?? null).get(payer.toLowerCase());
    if (keeper !== undefined) {
      throw cannotProcess(
        'invalid_payer',
        `${payer} is ${keeper}, which keeps what it is sent: it cannot be the payer refunds and recovered funds go to.`,
        'payer',
      );
    }
    const record = await chain.readDeposit(deposit);
    if (record.deployed && record.payer !== ZeroAddress) throw chainRejection('PayerNotDisputed');
    const call = chain.attestPayerCall(deposit, payer);
    return {
      chain: facts.chain,
      to: getAddress(call.to),
      data: call.data,
      payer,
      admin: await chain.registryAdmin(),
    };
  }

  /**
   * Records the outflows of a transaction someone else submitted from the payment's deposit (a reclaim by the
   * payer after the authorization expiry, a capture submitted with the merchant's signature by a third party).
   */
  async recordTransaction(paymentId: string, txHash: string): Promise<ActionAnswer> {
    return this.exclusive(paymentId, async () => {
      const loaded = await this.load(paymentId);
      const { chain, deposit } = this.depositOf(loaded.state);
      const outflows = await chain.outflowsOfTransaction(deposit, txHash);
      const revision = await this.recordOutflows(loaded, chain, outflows);
      return { paymentId, revision, txHash, submission: 'confirmed' };
    });
  }

  private signed(
    kind: SignedActionKind,
    owner: ActionOwner,
    paymentId: string,
    body: SignedActionBody,
    requestId: string,
  ): Promise<ActionAnswer> {
    return this.request(owner, paymentId, requestId, async (loaded, commandId) => {
      const { state } = loaded;
      const amount = parseActionAmount(body.amount).toString();
      const now = this.clock.now();
      // The aggregate's rules first: a flagged, unfunded or already settled payment is refused whatever was signed.
      if (kind === 'capture')
        decidePayment({ type: 'RequestCapture', amount, settlementAddress: '', now }, state);
      if (kind === 'refund')
        await this.screeningWoken(loaded, () => decidePayment({ type: 'RequestRefund', amount, now }, state));
      if (kind === 'rescue' && !state.deployment) {
        throw conflict(
          'deposit_not_deployed',
          'The deposit contract is not deployed yet; nothing can be rescued.',
        );
      }

      const { chain, deposit, facts } = this.depositOf(state);
      const record = await chain.readDeposit(deposit);
      if (!record.deployed) {
        throw conflict('deposit_not_deployed', 'The deposit contract is not deployed yet.');
      }
      if (record.flagged) throw chainRejection('PaymentIsFlagged');
      const [auth, chainTime] = await Promise.all([chain.merchantAuth(record.merchantId), chain.chainTime()]);
      const action = buildSignedAction(
        kind,
        body,
        { ...facts, payer: record.payer },
        auth.epoch,
        this.deployment?.addresses ?? null,
      );
      verifySignedAction(action, { ...auth, chainTime }, await chain.signatureUsed(deposit, action.digest));

      // A rescue is bounded by what the chain says the deposit holds (native coin is not observed).
      const onChainBalance =
        kind === 'rescue' ? (await chain.balanceOf(action.token, deposit)).toString() : undefined;
      if (kind === 'rescue') {
        decidePayment(
          { type: 'RequestRescue', asset: action.asset, to: action.to ?? '', amount, onChainBalance, now },
          state,
        );
      }
      const move = {
        token: action.token,
        amount: action.amount,
        deadline: action.deadline,
        signature: action.signature,
      };
      const call: DepositCall =
        kind === 'capture'
          ? chain.captureCall(deposit, move)
          : kind === 'refund'
            ? chain.refundCall(deposit, { ...move, payer: action.to ?? '' })
            : chain.rescueCall(deposit, { ...move, to: action.to ?? '' });
      await this.simulateOrRefuse(chain, call);

      const command: PaymentCommandWithoutTime =
        kind === 'capture'
          ? { type: 'RequestCapture', amount, settlementAddress: record.settlement }
          : kind === 'refund'
            ? { type: 'RequestRefund', amount }
            : {
                type: 'RequestRescue',
                asset: action.asset,
                to: action.to ?? '',
                amount,
                ...(onChainBalance !== undefined ? { onChainBalance } : {}),
              };
      await this.keep(loaded, call, commandId);
      const appended = await this.append(loaded, command, commandId);
      if (!appended.changed) return this.replayed(loaded.paymentId, appended.revision);
      return this.submitAndRecord(loaded, chain, call, commandId);
    });
  }

  /**
   * A merchant's request on its payment, one at a time per payment: another merchant's (or mode's) payment is 404,
   * and a retry of a request that was applied (its answer lost, or the process died before it was sent) sends what
   * was not sent and answers the rest; never a call twice on purpose. `run` gets the command id of this attempt.
   */
  private request(
    owner: ActionOwner,
    paymentId: string,
    requestId: string,
    run: (loaded: Loaded, commandId: string) => Promise<ActionAnswer>,
  ): Promise<ActionAnswer> {
    return this.exclusive(paymentId, async () => {
      const loaded = await this.loadOwned(owner, paymentId);
      this.assertModeServed(loaded);
      const attempt = await this.attemptOf(loaded, requestId);
      if (attempt.applied) return this.resume(loaded, attempt.commandId);
      return run(loaded, attempt.commandId);
    });
  }

  /**
   * Sends a requested action whose call was kept but never sent (the process died between the request fact and
   * the broadcast): what the service does for each unfinished call at start. A call whose request fact never made
   * it into the stream was never requested: it is dropped (the merchant's retry requests it again).
   */
  resumeSubmission(paymentId: string, commandId: string): Promise<ActionAnswer> {
    return this.exclusive(paymentId, async () => {
      const loaded = await this.load(paymentId);
      if (!loaded.commandIds.has(commandId)) {
        await this.submissions.markDone(paymentId, commandId, null);
        return this.replayed(paymentId, loaded.revision);
      }
      // Kept unfinished, not dropped: the request fact is in the stream, and only a deployment of the payment's
      // mode may send it (the resumer logs the refusal at every start).
      this.assertModeServed(loaded);
      return this.resume(loaded, commandId);
    });
  }

  /**
   * Reads what moved out of the payment's deposit from the deposit's own logs since its deployment and records each
   * outflow not recorded yet (idempotent per log): transactions someone else sent (a reclaim by the payer after the
   * authorization expiry, a merchant-signed capture relayed by a third party), or ours whose answer was lost.
   */
  reconcileDeposit(paymentId: string): Promise<ActionAnswer> {
    return this.exclusive(paymentId, async () => this.reconcile(await this.load(paymentId)));
  }

  /**
   * 409 `chain_mode_mismatch` before anything is read from the chain or written: a payment of the other mode than
   * this deployment's chains (recorded before checkouts were refused to such merchants) has its deposit address on
   * chains that are not its merchant's; the operator key acts on none of them for it. Reads and the recording of
   * what others moved out of the deposit stay possible (they send nothing).
   */
  private assertModeServed(loaded: Loaded): void {
    if (this.deployment) assertChainModeServed(servedChainMode(this.deployment), loaded.owner.mode);
  }

  /**
   * The command id a request runs under. Its first attempt runs under the request id (the Idempotency-Key). An
   * attempt whose call the chain refused at the broadcast or reverted moved nothing, and the API did not spend the
   * key on that answer (a 409, a 400 validation error or the 502 are not stored): the merchant's retry comes back
   * with the same key (corrected after a 409 or 400; the same request after a 5xx, the only one the gateway lets
   * claim it), while the failed attempt's request fact keeps that id in the stream.
   * Answering the retry as applied would say 200 for a capture or refund that never happened, so it runs as the
   * next attempt (`<key>#<n>`). A signature is single-use only once a call succeeds, so running again is safe.
   */
  private async attemptOf(
    loaded: Loaded,
    requestId: string,
  ): Promise<{ commandId: string; applied: boolean }> {
    for (let n = 1; ; n++) {
      const commandId = n === 1 ? requestId : `${requestId}#${n}`;
      if (!loaded.commandIds.has(commandId)) return { commandId, applied: false };
      const kept = await this.submissions.find(loaded.paymentId, commandId);
      if (!kept?.failed) return { commandId, applied: true };
    }
  }

  /** Keeps the call durably before its request fact (see ActionSubmissions). */
  private async keep(loaded: Loaded, call: DepositCall, commandId: string): Promise<void> {
    await this.submissions.save({
      paymentId: loaded.paymentId,
      commandId,
      chain: this.depositOf(loaded.state).facts.chain,
      to: call.to,
      data: call.data,
    });
  }

  private async resume(loaded: Loaded, commandId: string): Promise<ActionAnswer> {
    const pending = await this.submissions.find(loaded.paymentId, commandId);
    if (!pending || pending.done) return this.replayed(loaded.paymentId, loaded.revision);
    const chain = this.chains.for(pending.chain);
    const call: DepositCall = { to: pending.to, data: pending.data };
    const failed =
      loaded.commandTypes.get(commandId) === 'PaymentPayerDisputeRequested.v1'
        ? this.disputeFailed(loaded, commandId)
        : undefined;
    const simulated = await chain.simulate(call);
    if (simulated.kind === 'rejected') {
      // Nothing to send: it landed already (our broadcast just before the crash, or someone else's submission of
      // the same signature), or the chain moved on. What did move is in the deposit's logs.
      const reconciled = await this.reconcile(loaded);
      // A dispute's log is the indexer's to record, not the reconcile's: while none is, the request is taken as
      // failed so it holds no new dispute back (a landed one's log, recorded later, still clears the payer).
      await failed?.(null);
      await this.submissions.markDone(loaded.paymentId, commandId, null);
      return { ...reconciled, submission: 'replayed' };
    }
    return this.submitAndRecord(loaded, chain, call, commandId, failed);
  }

  private async reconcile(loaded: Loaded): Promise<ActionAnswer> {
    const { chain, deposit } = this.depositOf(loaded.state);
    const deployTx = loaded.state.deployment?.txHash ?? null;
    let revision = loaded.revision;
    // Payer logs are the indexer's to record (at its depth, retracted on a reorg): not read here at the head.
    for (const txHash of await chain.transactionsFrom(deposit, deployTx)) {
      revision = await this.recordOutflows(loaded, chain, await chain.outflowsOfTransaction(deposit, txHash));
    }
    return { paymentId: loaded.paymentId, revision, txHash: null, submission: 'confirmed' };
  }

  private async reclaim(loaded: Loaded): Promise<ActionAnswer> {
    const { chain, deposit } = this.depositOf(loaded.state);
    const call = chain.reclaimCall(deposit);
    await this.simulateOrRefuse(chain, call);
    // No request fact: anyone may trigger a reclaim, and its outflow is the fact.
    return this.submitAndRecord(loaded, chain, call);
  }

  /**
   * A refusal for a payer not screened yet (409 `payer_screening_pending`) appends nothing, and a payer attested
   * before attested payers were screened has no event left to start its screening: the deposit worker is woken for
   * it, so a retry of the request passes once the payer is screened clear.
   */
  private async screeningWoken<T>(loaded: Loaded, decide: () => T): Promise<T> {
    try {
      return decide();
    } catch (error) {
      if (error instanceof DomainError && error.code === 'payer_screening_pending')
        await this.depositJobs?.wake(loaded.paymentId, this.clock.now());
      throw error;
    }
  }

  private async chainNow(chain: string): Promise<Date> {
    return new Date(Number(await this.chains.for(chain).chainTime()) * 1000);
  }

  private escrowReclaimable(state: PaymentState, now: Date): boolean {
    return (
      !state.flagged &&
      state.phase === 'escrow_confirmed' &&
      state.authorizationExpiry !== null &&
      now.getTime() >= Date.parse(state.authorizationExpiry) &&
      state.escrowFunded - state.captured - state.refunded > 0n
    );
  }

  private async simulateOrRefuse(chain: DepositChain, call: DepositCall): Promise<void> {
    const simulated = await chain.simulate(call);
    if (simulated.kind === 'rejected') throw chainRejection(simulated.errorName);
  }

  private async submitAndRecord(
    loaded: Loaded,
    chain: DepositChain,
    call: DepositCall,
    commandId?: string,
    failed?: (txHash: string | null) => Promise<void>,
  ): Promise<ActionAnswer> {
    const outcome: DepositActionOutcome = await chain.submit(call);
    // Before the call is marked done: a process dying in between leaves it unfinished (the resume records the
    // failure, idempotently), never done with the failure unrecorded.
    if (failed && (outcome.kind === 'rejected' || outcome.kind === 'reverted'))
      await failed('txHash' in outcome ? outcome.txHash : null);
    // Sent (or refused outright): never again on purpose. An exception (RPC down, a broadcast of unknown outcome)
    // leaves the call unfinished, so a retry or the next start sends it (a landed one is then refused harmlessly).
    if (commandId !== undefined)
      await this.submissions.markDone(
        loaded.paymentId,
        commandId,
        'txHash' in outcome ? outcome.txHash : null,
        outcome.kind === 'rejected' || outcome.kind === 'reverted',
      );
    switch (outcome.kind) {
      case 'rejected':
        throw chainRejection(outcome.errorName);
      case 'reverted':
        throw new DomainError({
          type: 'api_error',
          status: 502,
          code: 'transaction_reverted',
          message: `The transaction ${outcome.txHash} reverted on chain (${outcome.errorName ?? 'no reason'}); nothing moved. Retry with a new signature (and a new Idempotency-Key: the key stays with this request).`,
        });
      case 'pending': {
        const { revision } = await this.load(loaded.paymentId);
        return { paymentId: loaded.paymentId, revision, txHash: outcome.txHash, submission: 'pending' };
      }
      case 'confirmed': {
        // A PayerDisputed log in the receipt is not recorded here: one confirmation is no depth, and no retraction
        // would follow this read. The indexer's sighting records it (the payment shows dispute_pending until then).
        const revision = await this.recordOutflows(loaded, chain, outcome.outflows);
        return { paymentId: loaded.paymentId, revision, txHash: outcome.txHash, submission: 'confirmed' };
      }
    }
  }

  private async recordOutflows(
    loaded: Loaded,
    chain: DepositChain,
    outflows: readonly DepositOutflow[],
  ): Promise<number> {
    const current = await this.load(loaded.paymentId);
    let revision = current.revision;
    const caip2 = formatCaip2(chain.chainId);
    for (const o of outflows) {
      const appended = await this.append(
        loaded,
        {
          type: 'RecordOutflow',
          kind: o.kind,
          txHash: o.txHash.toLowerCase(),
          logIndex: o.logIndex,
          blockHash: o.blockHash.toLowerCase(),
          blockNumber: String(o.blockNumber),
          asset: outflowAsset(current.state, caip2, o.token),
          amount: o.amount.toString(),
          to: o.to,
        },
        // The key the indexer's sighting of the same log uses: one fact whichever path records it first (after a
        // reorg undid its record, the redo's: the log mined again is recorded again, not answered as a replay; at an
        // index whose outflow was last seen elsewhere, the block's).
        outflowRecordKey(current.state, o.txHash, o.logIndex, o.blockHash),
      );
      revision = appended.revision;
    }
    return revision;
  }

  private replayed(paymentId: string, revision: number): ActionAnswer {
    return { paymentId, revision, txHash: null, submission: 'replayed' };
  }

  private depositOf(state: PaymentState): {
    chain: DepositChain;
    deposit: string;
    facts: PaymentSigningFacts;
  } {
    const created = state.created;
    if (!created) throw notFound('payment');
    const asset = paymentAsset(state);
    const chainId = state.deployment?.chain ?? null;
    if (!state.deployment || !chainId || !asset) {
      throw conflict('deposit_not_deployed', 'The deposit contract is not deployed yet.');
    }
    parseCaip2(chainId, 'chain');
    return {
      chain: this.chains.for(chainId),
      deposit: created.depositAddress,
      facts: {
        onChainId: created.onChainId,
        depositAddress: created.depositAddress,
        chain: chainId,
        asset,
        payer: state.deployment.payer,
      },
    };
  }

  private async load(paymentId: string): Promise<Loaded> {
    const streamId = paymentStreamId(paymentId);
    const { state, revision, events } = await loadAggregate(this.store, streamId, paymentDecider);
    if (!state.created) throw notFound('payment', paymentId);
    const mode = events[0]?.metadata?.mode ?? 'test';
    const types = new Map(events.map((e) => [e.id, e.type]));
    return {
      state,
      revision,
      paymentId,
      owner: { merchantId: state.created.merchantId, mode },
      commandIds: { has: (commandId) => types.has(deterministicEventId(streamId, commandId, 0)) },
      commandTypes: { get: (commandId) => types.get(deterministicEventId(streamId, commandId, 0)) },
    };
  }

  /** Another merchant's payment (or one of the other mode) is as unknown as a made-up id. */
  private async loadOwned(owner: ActionOwner, paymentId: string): Promise<Loaded> {
    const loaded = await this.load(paymentId).catch((error: unknown) => {
      if (error instanceof DomainError && error.status === 404) throw notFound('payment', paymentId);
      throw error;
    });
    if (loaded.owner.merchantId !== owner.merchantId || loaded.owner.mode !== owner.mode) {
      throw notFound('payment', paymentId);
    }
    return loaded;
  }

  private async append(
    loaded: Loaded,
    command: PaymentCommandWithoutTime,
    idempotencyKey: string,
    decisionTime?: Date,
  ): Promise<{ revision: number; changed: boolean }> {
    const owner = { id: loaded.paymentId, merchant_id: loaded.owner.merchantId, mode: loaded.owner.mode };
    const { revision, changed } = decisionTime
      ? await this.payments.runAt(owner, command, decisionTime, idempotencyKey)
      : await this.payments.run(owner, command, idempotencyKey);
    return { revision, changed };
  }

  private exclusive<T>(paymentId: string, run: () => Promise<T>): Promise<T> {
    const previous = this.running.get(paymentId) ?? Promise.resolve();
    const next = previous.then(run, run);
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    this.running.set(paymentId, settled);
    void settled.then(() => {
      if (this.running.get(paymentId) === settled) this.running.delete(paymentId);
    });
    return next;
  }
}
