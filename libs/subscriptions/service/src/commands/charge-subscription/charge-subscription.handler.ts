import { Controller, Inject, Logger } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { getAddress, Interface, type JsonRpcProvider } from 'ethers';
import { CLOCK, deterministicEventId, EVENT_STORE } from '@stablepay/aggregate';
import { CommandHandler } from '@stablepay/commands';
import { assertChainModeServed } from '@stablepay/chain-operator';
import {
  connectStablepayRegistry,
  connectSubscriptionManager,
  SubscriptionManagerAbi,
  toOnChainId,
} from '@stablepay/contracts';
import type { EventStore } from '@stablepay/event-store';
import { isSignedBy, quoteHash, stablepayDomain } from '@stablepay/evm';
import type { RelayOutcome, RelayRequest } from '@stablepay/relayer';
import {
  type ChargeSubscriptionCommand,
  type ChargeSubscriptionResult,
  SUBSCRIPTION_CHARGE_COMMANDS,
} from '@stablepay/subscriptions-api';
import {
  type ChargeObservation,
  chargePreflight,
  type ChargeQuote,
  NONCE_ALREADY_USED,
  type QuotedFiat,
  subscriptionStreamId,
  succeededChargeId,
} from '@stablepay/subscriptions-domain';
import { type Clock, derivedId, DomainError } from '@stablepay/util';
import { ChargeQuotes } from '../../charges/charge-quotes';
import { loadOwnedSubscription } from '../../charges/owned-subscription';
import { MerchantProfiles } from '../../subscription-checkouts/merchant-profiles';
import { SUBSCRIPTIONS_CONFIG, type SubscriptionsConfig } from '../../subscriptions.config';
import { ChainTime, chainUnavailable, fromChain, OperatorRelayers } from '../../subscriptions/chain-access';
import { chargeObservation } from '../../subscriptions/chain-facts';
import { chargedReceiptLog, findChargedLogs } from '../../subscriptions/charged-logs';
import { SubscriptionCommands } from '../../subscriptions/subscription.commands';
import { SubscriptionManagerCommands } from '../../subscriptions/subscription-manager.commands';
import { outcomeName, SubscriptionManagers } from '../../subscriptions/subscription-managers';

const MANAGER = new Interface(SubscriptionManagerAbi);

/**
 * Use case: charge a subscription (POST /subscriptions/:id/charge, signed with signCharge), in the owning service.
 *
 * 1. Preflight (`chargePreflight`, the pure table of docs/subscriptions.md) on the subscription's own stream, at chain
 *    time, with the quote the code names and the EIP-712 check against the registry's signer at its current epoch. A
 *    rejection throws: nothing is submitted, appended or sent (SPEC fiat field rule 7).
 * 2. The operator's relayer simulates and submits `charge` (the simulation starts beside the preflight's reads and is
 *    dropped when the preflight refuses); the receipt is recorded before answering (SPEC "persist the
 *    receipt synchronously"): `RecordChargeSucceeded` from the SubscriptionCharged log, or `RecordChargeReverted`
 *    (simulation: `tx_hash` null; receipt: the transaction) whose paused brake the aggregate applies.
 * 3. "My charge landed via someone else": when our simulation or transaction fails and the nonce is used on chain
 *    (NonceAlreadyUsed, or `chargeNonceUsed` true), the SubscriptionCharged log of that nonce is read and recorded as
 *    the success it is (never failed, never paused). A merchant retry of that charge is `already_charged` at preflight
 *    and answered with the landed charge: nothing is submitted twice.
 *
 * Answers the `subc_` id; the gateway answers with the charge as the ledger recorded it.
 */
@Controller()
export class ChargeSubscriptionHandler {
  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(SubscriptionManagers) private readonly managers: SubscriptionManagers,
    @Inject(OperatorRelayers) private readonly relayers: OperatorRelayers,
    @Inject(ChainTime) private readonly chains: ChainTime,
    @Inject(SubscriptionCommands) private readonly commands: SubscriptionCommands,
    @Inject(SubscriptionManagerCommands) private readonly managerFacts: SubscriptionManagerCommands,
    @Inject(ChargeQuotes) private readonly quotes: ChargeQuotes,
    @Inject(MerchantProfiles) private readonly profiles: MerchantProfiles,
    @Inject(SUBSCRIPTIONS_CONFIG) private readonly config: SubscriptionsConfig,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  private readonly logger = new Logger('subscription-charges');

  /** Charges of one subscription run one at a time in this process: a retry never races the attempt it repeats. */
  private readonly inFlight = new Map<string, Promise<void>>();

  @CommandHandler(SUBSCRIPTION_CHARGE_COMMANDS.charge)
  handle(@Payload() command: ChargeSubscriptionCommand): Promise<ChargeSubscriptionResult> {
    const key = command.subscriptionId.toLowerCase();
    const previous = this.inFlight.get(key) ?? Promise.resolve();
    const run = previous.then(() => this.charge(command));
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    this.inFlight.set(key, settled);
    void settled.then(() => {
      if (this.inFlight.get(key) === settled) this.inFlight.delete(key);
    });
    return run;
  }

  private async charge(command: ChargeSubscriptionCommand): Promise<ChargeSubscriptionResult> {
    const owner = command.merchant;
    // What needs only the request is read beside the stream: the merchant's managers (the chain comes from the
    // stream) and the quote (scoped to the merchant; read for nothing when the subscription turns out not theirs).
    const [sub, managers, quote, profile] = await Promise.all([
      loadOwnedSubscription(this.store, owner, command.subscriptionId),
      this.managers.ofMerchant(owner.merchantId),
      command.quoteCode ? this.quotes.find(owner, command.quoteCode) : Promise.resolve(null),
      // The settlement as it is now: a price lock issued before PUT /payments/settlement changed it is not redeemed.
      this.profiles.get(owner.merchantId),
    ]);
    // Right after the ownership 404, before anything is judged or looked up for the chain (a merchant of the other
    // mode than this deployment's chains has no manager here: that was 503 chain_unavailable, not this 409).
    assertChainModeServed(this.config.chainMode, owner.mode);
    const c = sub.state.created;
    const subscriptionId = c.subscriptionId.toLowerCase();
    // A retried command (same Idempotency-Key) whose outcome is already recorded is answered, not submitted again.
    const recorded = this.alreadyRecorded(sub.events, subscriptionId, command.commandId, sub.revision);
    if (recorded) return recorded;

    const manager = managers.find((m) => m.chain === c.chain);
    const chain = this.chains.chain(owner.mode, c.chain);
    if (!manager || !chain || !this.config.registry)
      throw chainUnavailable(`The subscription manager on ${c.chain} cannot be reached.`);
    const relayer = this.relayers.for(owner.mode, c.chain);
    const amount = BigInt(command.amount);
    const nonce = command.nonce;
    const deadline = BigInt(command.deadline);
    const signedQuoteHash = quoteHash(command.quoteCode);
    const chargeRequest = (): RelayRequest => ({
      to: manager.address,
      data: MANAGER.encodeFunctionData('charge', [
        subscriptionId,
        amount,
        nonce,
        signedQuoteHash,
        deadline,
        command.signature,
      ]),
      abi: MANAGER,
    });
    // The simulation (with the fee read) starts beside the preflight's reads: it only reads the chain, so a
    // preflight refusal just drops it (nothing is sent or written), and a charge that passes does not wait for it
    // after its preflight. Encoded inside the promise: a malformed signature is the preflight's to refuse.
    const preparing = Promise.resolve().then(() => relayer.prepare(chargeRequest()));
    preparing.catch(() => undefined);
    // Chain time fresh for every charge: a cached block time could miss a window boundary (budget) or a deadline.
    this.chains.invalidate(owner.mode, c.chain);
    // The registry is read through the chain-time provider, not the relayer's: the relayer's provider sends the
    // calls of one tick as one batch, whose answer waits for the simulation's gas estimate, and the EIP-712 check
    // needs only `merchantAuth` (it then runs while the simulation is still under way).
    const reader = this.chains.provider(owner.mode, c.chain) ?? relayer.provider;
    const [chainNow, auth, managerPausedBy, changePending] = await Promise.all([
      this.chains.now(owner.mode, c.chain),
      fromChain(
        c.chain,
        connectStablepayRegistry(this.config.registry, reader).merchantAuth(toOnChainId(owner.merchantId)),
      ),
      this.managerFacts.pausedBy(c.chain, manager.address),
      this.managers.pendingMerchantChange(owner.merchantId, owner.mode, c.chain, reader),
    ]);
    const signatureValid = isSignedBy(
      'Charge',
      stablepayDomain(chain.chainId, getAddress(manager.address)),
      {
        subscriptionId,
        amount,
        nonce: BigInt(nonce),
        quoteHash: signedQuoteHash,
        epoch: auth.epoch,
        deadline,
      },
      command.signature,
      auth.signer,
    );
    const now = this.clock.now();
    const preflight = chargePreflight({
      state: sub.state,
      request: {
        subscriptionId,
        amount,
        nonce,
        deadline,
        quoteHash: signedQuoteHash,
        quoteCode: command.quoteCode,
      },
      quote,
      signatureValid,
      chainNow,
      now,
      managerPausedBy,
      settlement: profile.settlement,
    });
    // The registry still holds the signer the merchant retired and the settlement address it replaced: neither the
    // old key's charge (valid on chain) nor the new key's (not yet valid there) is sent. A retry of a charge that
    // already landed or awaits its receipt is still answered.
    if (
      changePending &&
      (preflight.outcome === 'ok' ||
        (preflight.outcome === 'rejected' && preflight.code === 'invalid_signature'))
    )
      throw changePending;
    if (preflight.outcome === 'rejected')
      throw new DomainError({
        type: preflight.type,
        status: preflight.status,
        code: preflight.code,
        message: preflight.message,
        ...(preflight.param !== undefined ? { param: preflight.param } : {}),
      });
    if (preflight.outcome === 'already_charged')
      return { chargeId: preflight.chargeId, status: 'succeeded', revision: sub.revision };

    const request = chargeRequest();
    const wait = { timeoutMs: this.config.chargeReceiptTimeoutMs };
    // A retry of a charge whose receipt timed out waits for that same transaction: nothing is sent twice. Only a
    // transaction the node no longer knows (dropped from its pool) is sent again; the contract's nonce keeps even
    // that from charging twice.
    const pendingTx =
      preflight.outcome === 'pending'
        ? await fromChain(c.chain, relayer.provider.getTransaction(preflight.txHash))
        : null;
    let outcome: RelayOutcome;
    if (pendingTx) {
      outcome = await fromChain(
        c.chain,
        relayer.waitForReceipt(
          {
            kind: 'broadcast',
            txHash: pendingTx.hash,
            nonce: pendingTx.nonce,
            from: pendingTx.from,
            gasLimit: pendingTx.gasLimit,
            request,
          },
          wait,
        ),
      );
      if (outcome.kind === 'receipt_timeout') throw chargePending(outcome.txHash);
    } else {
      // A broadcast whose answer was lost is retried safely: the contract's nonce keeps it from charging twice.
      const prepared = await fromChain(c.chain, preparing);
      const sent =
        prepared.kind === 'simulation_rejected'
          ? prepared
          : await fromChain(c.chain, relayer.sendPrepared(prepared));
      outcome =
        sent.kind === 'simulation_rejected'
          ? sent
          : await fromChain(c.chain, relayer.waitForReceipt(sent, wait));
      if (outcome.kind === 'receipt_timeout') {
        // The relayer gave up waiting; the transaction may still land. Recorded as pending on the nonce, so a retry
        // (or a new request for this nonce) waits for it; the indexer records it when it lands.
        await this.commands.run(
          subscriptionId,
          { merchantId: owner.merchantId, mode: owner.mode },
          {
            type: 'RecordChargeSubmitted',
            nonce,
            amount: amount.toString(),
            quoteHash: signedQuoteHash,
            txHash: outcome.txHash,
            now,
          },
          `${command.commandId}:submitted`,
        );
        throw chargePending(outcome.txHash);
      }
    }
    this.chains.invalidate(owner.mode, c.chain);
    const ownerKey = { merchantId: owner.merchantId, mode: owner.mode };

    if (outcome.kind === 'confirmed') {
      // The log carries the block time (`timestamp`): no further RPC round trip before recording.
      const seen = chargedReceiptLog(
        { logs: outcome.receipt.logs, blockNumber: outcome.blockNumber, blockHash: outcome.blockHash },
        manager.address,
        subscriptionId,
        nonce,
        c.chain,
      );
      if (!seen) throw new Error(`receipt ${outcome.txHash} holds no SubscriptionCharged of nonce ${nonce}`);
      // The fact keeps the receipt's block: a reorg that takes the block out before the indexer has read it (it reads
      // INDEXER_CONFIRMATIONS behind the head) is found by the receipt check, whose row ChargeReceiptsConsumer writes
      // from the fact, off this answer.
      const observation: ChargeObservation = {
        ...chargeObservation(seen.log),
        receipt: {
          manager: seen.log.contract,
          blockHash: seen.log.blockHash.toLowerCase(),
          logIndex: seen.index,
        },
      };
      const chargeId = succeededChargeId(c.chain, subscriptionId, nonce);
      const { revision, newEvents } = await this.commands.runFrom(
        sub,
        subscriptionId,
        ownerKey,
        {
          type: 'RecordChargeSucceeded',
          charge: observation,
          writtenBy: 'api',
          quotedFiat: quotedFiatOf(quote),
        },
        command.commandId,
      );
      // The quote is used from the append on: the recorded charge carries its hash, which the preflight checks
      // beside the quote store's record. That record follows without holding the answer.
      if (command.quoteCode) this.recordQuoteUse(command.quoteCode, chargeId);
      return { chargeId, status: 'succeeded', revision, appended: newEvents.length > 0 };
    }

    // The attempt failed. If the nonce is used on chain, the charge landed (someone submitted the signature first).
    const name = outcomeName(outcome);
    const nonceUsed =
      name === NONCE_ALREADY_USED ||
      (await fromChain(
        c.chain,
        connectSubscriptionManager(manager.address, relayer.provider).chargeNonceUsed(subscriptionId, nonce),
      ));
    if (nonceUsed) {
      const landed = await fromChain(
        c.chain,
        this.findChargedLog(
          relayer.provider,
          manager.address,
          { subscriptionId, txHash: c.txHash },
          nonce,
          c.chain,
        ),
      );
      const { revision } = await this.commands.run(
        subscriptionId,
        ownerKey,
        {
          type: 'RecordChargeReverted',
          chargeId: succeededChargeId(c.chain, subscriptionId, nonce),
          nonce,
          amount: amount.toString(),
          txHash: txHashOf(outcome),
          failureReason: NONCE_ALREADY_USED,
          stage: outcome.kind === 'simulation_rejected' ? 'simulation' : 'receipt',
          landed,
          quotedFiat: quotedFiatOf(quote),
          quoteHash: signedQuoteHash,
          now,
        },
        command.commandId,
      );
      return this.succeeded(c.chain, subscriptionId, nonce, command.quoteCode, revision);
    }
    // A real failure: its own row (an id per attempt, derived from the command so a retry records it once).
    const chargeId = derivedId(
      'subc',
      [owner.merchantId, owner.mode, subscriptionId, command.commandId].join('\u0000'),
    );
    const { revision } = await this.commands.run(
      subscriptionId,
      ownerKey,
      {
        type: 'RecordChargeReverted',
        chargeId,
        nonce,
        amount: amount.toString(),
        txHash: txHashOf(outcome),
        failureReason: name,
        stage: outcome.kind === 'simulation_rejected' ? 'simulation' : 'receipt',
        landed: null,
        now,
      },
      command.commandId,
    );
    return { chargeId, status: 'failed', revision };
  }

  private recordQuoteUse(quoteCode: string, chargeId: string): void {
    this.quotes.markUsed(quoteCode, chargeId).catch((error: unknown) =>
      // The subscription's stream still proves the use to the preflight; nothing writes this record again.
      this.logger.error({
        msg: 'recording a quote as used failed',
        quoteCode,
        chargeId,
        error: String(error),
      }),
    );
  }

  private async succeeded(
    chain: string,
    subscriptionId: string,
    nonce: number,
    quoteCode: string | null,
    revision: number,
  ): Promise<ChargeSubscriptionResult> {
    const chargeId = succeededChargeId(chain, subscriptionId, nonce);
    if (quoteCode) await this.quotes.markUsed(quoteCode, chargeId);
    return { chargeId, status: 'succeeded', revision };
  }

  private alreadyRecorded(
    events: ReadonlyArray<{ readonly id: string; readonly type: string; readonly data: unknown }>,
    subscriptionId: string,
    commandId: string,
    revision: number,
  ): ChargeSubscriptionResult | null {
    const first = deterministicEventId(subscriptionStreamId(subscriptionId), commandId, 0);
    const event = events.find((e) => e.id === first);
    if (!event) return null;
    const { chargeId } = event.data as { chargeId: string };
    return {
      chargeId,
      status: event.type === 'SubscriptionChargeFailed.v1' ? 'failed' : 'succeeded',
      revision,
    };
  }

  /** The SubscriptionCharged log of a nonce, whoever submitted it. */
  private async findChargedLog(
    provider: JsonRpcProvider,
    manager: string,
    subscription: { readonly subscriptionId: string; readonly txHash: string },
    nonce: number,
    chain: string,
  ): Promise<ChargeObservation | null> {
    const logs = await findChargedLogs(
      provider,
      manager,
      subscription,
      chain,
      this.config.chainLogRange(chain),
    );
    return logs.find((c) => c.nonce === nonce) ?? null;
  }
}

/**
 * The answer while a broadcast charge awaits its receipt (docs/subscriptions.md, Charge receipt timeout): retryable
 * like any 503; the retry (same body) waits for this transaction and never sends another.
 */
function chargePending(txHash: string): DomainError {
  return new DomainError({
    type: 'api_error',
    status: 503,
    code: 'charge_pending',
    message: `Charge transaction ${txHash} was broadcast and is not mined yet; send the same request again for its outcome (nothing is sent twice).`,
  });
}

function txHashOf(
  outcome: Exclude<RelayOutcome, { kind: 'confirmed' } | { kind: 'receipt_timeout' }>,
): string | null {
  return outcome.kind === 'reverted' ? outcome.txHash : null;
}

/** The fiat side of the quote a charge redeemed: what a fiat-settled business's payout of that charge is worth. */
function quotedFiatOf(quote: ChargeQuote | null): QuotedFiat | null {
  if (!quote || quote.fiatAmount === null || quote.fiatCurrency === null) return null;
  return { amount: quote.fiatAmount, currency: quote.fiatCurrency, quoteHash: quote.quoteHash };
}
