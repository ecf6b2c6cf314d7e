import { Inject, Injectable, Logger } from '@nestjs/common';
import { Interface, getAddress } from 'ethers';
import { assertChainModeServed } from '@stablepay/chain-operator';
import { connectStablepayRegistry, SubscriptionManagerAbi, toOnChainId } from '@stablepay/contracts';
import { isSignedBy, stablepayDomain } from '@stablepay/evm';
import type { CancelSubscriptionCommand, SubscriptionCommandResult } from '@stablepay/subscriptions-api';
import { cannotProcess, conflict } from '@stablepay/util';
import { SUBSCRIPTIONS_CONFIG, type SubscriptionsConfig } from '../subscriptions.config';
import { ChainTime, chainUnavailable, fromChain, OperatorRelayers } from './chain-access';
import { SubscriptionCommands } from './subscription.commands';
import { outcomeName, SubscriptionManagers } from './subscription-managers';
import type { RelayOutcome } from '@stablepay/relayer';
import { SubscriptionReader } from './subscription.reader';
import { findChargedLogs } from './charged-logs';

const MANAGER = new Interface(SubscriptionManagerAbi);
/** MAX_SIGNATURE_HORIZON of the contracts: a merchant signature's deadline lies at most 7 days ahead. */
const MAX_SIGNATURE_HORIZON_SECONDS = 7n * 24n * 3600n;

/**
 * Merchant cancel: preflight the `CancelSubscription` the merchant signed with signCancelSubscription (status, nonce,
 * deadline at chain time, the signature against the registry's signer at its current epoch), then the operator's
 * relayer submits `merchantCancel`; its confirmed receipt makes the subscription `cancelling` (the indexer's
 * SubscriptionCancelled then makes it `cancelled`). A rejection submits nothing and records nothing.
 */
@Injectable()
export class MerchantCancel {
  private readonly logger = new Logger(MerchantCancel.name);

  constructor(
    @Inject(SubscriptionReader) private readonly reader: SubscriptionReader,
    @Inject(SubscriptionManagers) private readonly managers: SubscriptionManagers,
    @Inject(OperatorRelayers) private readonly relayers: OperatorRelayers,
    @Inject(ChainTime) private readonly chains: ChainTime,
    @Inject(SubscriptionCommands) private readonly commands: SubscriptionCommands,
    @Inject(SUBSCRIPTIONS_CONFIG) private readonly config: SubscriptionsConfig,
  ) {}

  async handle(command: CancelSubscriptionCommand): Promise<SubscriptionCommandResult> {
    const row = await this.reader.getOwned(command.merchant, command.id);
    // Before anything is judged or read from the chain: a subscription of the other mode than this deployment's
    // chains (recorded before subscribes were refused) is cancelled on none of them, whatever its terms say.
    assertChainModeServed(this.config.chainMode, row.mode);
    const o = row.object;
    // A keyed retry whose first attempt cancelled (its process killed, or a 5xx, after the append) finds the
    // subscription cancelling or cancelled: it is answered what that attempt did, not told no cancel is needed.
    const applied = await this.commands.appliedRevision(o.id, command.commandId);
    if (applied !== undefined) return { id: o.id, revision: applied };
    if (o.status !== 'active')
      throw conflict('subscription_cancelled', `Subscription ${o.id} is ${o.status}: no cancel is needed.`);
    if (command.nonce !== o.charge_nonce)
      throw conflict(
        'nonce_mismatch',
        `nonce must be the subscription's current charge_nonce (${o.charge_nonce}), not ${command.nonce}.`,
        'nonce',
      );
    const chainNow = await this.chains.now(row.mode, row.chain);
    const deadline = BigInt(command.deadline);
    if (deadline < chainNow)
      throw cannotProcess('signature_expired', 'The signature deadline has passed (chain time).', 'deadline');
    if (deadline > chainNow + MAX_SIGNATURE_HORIZON_SECONDS)
      throw cannotProcess(
        'signature_deadline_too_far',
        'The signature deadline lies more than 7 days ahead; the contract refuses it.',
        'deadline',
      );
    const manager = await this.managers.find(row.merchant_id, row.chain);
    const chain = this.chains.chain(row.mode, row.chain);
    if (!manager || !chain || !this.config.registry)
      throw chainUnavailable(`The subscription manager on ${row.chain} cannot be reached.`);
    const relayer = this.relayers.for(row.mode, row.chain);
    const auth = await fromChain(
      row.chain,
      connectStablepayRegistry(this.config.registry, relayer.provider).merchantAuth(
        toOnChainId(row.merchant_id),
      ),
    );
    const domain = stablepayDomain(chain.chainId, getAddress(manager.address));
    const message = {
      subscriptionId: o.id,
      nonce: BigInt(command.nonce),
      epoch: auth.epoch,
      deadline,
    };
    if (!isSignedBy('CancelSubscription', domain, message, command.signature, auth.signer))
      // While the settings name a signer the chain does not hold yet, the new key's signature is refused for that
      // reason, which the merchant can act on (the retired key's cancel, valid on chain and moving no money, goes on).
      throw (
        (await this.managers.pendingMerchantChange(row.merchant_id, row.mode, row.chain)) ??
        cannotProcess(
          'invalid_signature',
          "The signature is not the merchant signer's CancelSubscription of these terms at its current epoch.",
          'signature',
        )
      );
    const outcome = await fromChain(
      row.chain,
      relayer.submit({
        to: manager.address,
        data: MANAGER.encodeFunctionData('merchantCancel', [
          o.id,
          command.nonce,
          deadline,
          command.signature,
        ]),
        abi: MANAGER,
      }),
    );
    if (outcome.kind === 'simulation_rejected' || outcome.kind === 'reverted') {
      if (outcomeName(outcome) === 'InvalidNonce')
        await this.recordLandedCharges(row, manager.address, relayer.provider);
      throw refusal(outcome);
    }
    if (outcome.kind !== 'confirmed')
      throw chainUnavailable(
        `The cancel transaction ${outcome.txHash} was not mined in time; it may still land.`,
      );
    this.chains.invalidate(row.mode, row.chain);
    const { revision } = await this.commands.run(
      o.id,
      { merchantId: row.merchant_id, mode: row.mode },
      { type: 'ConfirmCancel', by: 'merchant', txHash: outcome.txHash, now: this.commands.now() },
      command.commandId,
    );
    return { id: o.id, revision };
  }

  /**
   * A charge the service has not recorded yet moved the nonce (the indexer records it at its next poll): its
   * SubscriptionCharged logs are read from the chain and recorded now by the owner, as the charge call records one
   * that another sender landed first, so the merchant re-reading the subscription to sign again sees the current
   * `charge_nonce` at once. The indexer's later report of the same logs records nothing twice. Best effort: the 409
   * is answered whatever this finds.
   */
  private async recordLandedCharges(
    row: Awaited<ReturnType<SubscriptionReader['getOwned']>>,
    manager: string,
    provider: Parameters<typeof findChargedLogs>[0],
  ): Promise<void> {
    const o = row.object;
    const owner = { merchantId: row.merchant_id, mode: row.mode };
    try {
      const { state } = await this.commands.owned(owner, o.id);
      const subscription = { subscriptionId: o.id, txHash: state.created.txHash };
      const range = this.config.chainLogRange(row.chain);
      const landed = (await findChargedLogs(provider, manager, subscription, row.chain, range)).filter(
        (c) => c.nonce >= o.charge_nonce,
      );
      let revision: number | null = null;
      for (const charge of landed) {
        const r = await this.commands.run(
          o.id,
          owner,
          { type: 'RecordChargeSucceeded', charge, writtenBy: 'api' },
          `landed:${charge.txHash}:${charge.nonce}`,
        );
        revision = r.revision;
      }
      if (revision !== null) await this.reader.getAtLeast(o.id, revision, { appended: true });
    } catch (error) {
      this.logger.warn({
        msg: 'recording the charge that overtook a cancel failed; the indexer records it',
        subscriptionId: o.id,
        error: String(error),
      });
    }
  }
}

/**
 * The contract's refusal of a cancel that passed preflight. The state the preflight read can be behind the chain: a
 * charge that landed meanwhile (another request, or a sender the service has not seen yet) moved the nonce, or the
 * subscriber's own cancel landed. Those are 409 with the preflight's codes (re-read, sign again or stop), never 422
 * `cancel_rejected`, which says these terms can never pass; any other contract error stays 422.
 */
function refusal(outcome: Extract<RelayOutcome, { kind: 'simulation_rejected' | 'reverted' }>): Error {
  const name = outcomeName(outcome);
  const args = outcome.kind === 'simulation_rejected' ? outcome.args : (outcome.revert?.args ?? []);
  if (name === 'InvalidNonce')
    return conflict(
      'nonce_mismatch',
      `The subscription's charge_nonce on chain is ${String(args[0] ?? 'another')}, not the signed ${String(args[1] ?? 'nonce')}: a charge landed first. Sign the cancel again at the current charge_nonce.`,
      'nonce',
    );
  if (name === 'SubscriptionNotActive')
    return conflict(
      'subscription_cancelled',
      'The subscription is no longer active on chain: no cancel is needed.',
    );
  return cannotProcess('cancel_rejected', `The contract refused the cancel: ${name}.`);
}
