import { Inject, Injectable } from '@nestjs/common';
import {
  Interface,
  MaxUint256,
  Wallet,
  getAddress,
  type Log,
  type Provider,
  type TransactionReceipt,
} from 'ethers';
import { assertChainModeServed } from '@stablepay/chain-operator';
import { SubscriptionManagerAbi, TestStablecoinAbi } from '@stablepay/contracts';
import { stablepayDomain, typesFor, type SubscribeAuthorizationMessage } from '@stablepay/evm';
import type {
  SubscribeAuthorizationResource,
  SubscribeCommand,
  SubscribeReported,
} from '@stablepay/subscriptions-api';
import { requireFiatPayoutDestination, subscriptionOptions } from '@stablepay/subscriptions-domain';
import { cannotProcess, conflict, DomainError, type Clock, notFound, validationError } from '@stablepay/util';
import { CLOCK } from '@stablepay/aggregate';
import { MerchantProfiles } from '../subscription-checkouts/merchant-profiles';
import { SubscriptionCheckoutPresenter } from '../subscription-checkouts/subscription-checkout.presenter';
import {
  type SubscriptionCheckoutRow,
  SubscriptionCheckoutReader,
} from '../subscription-checkouts/subscription-checkout.reader';
import { ChainTime, fromChain, OperatorRelayers } from './chain-access';
import { ChainObservationLog, type ManagerLog, SubscriptionChainFacts } from './chain-facts';
import { SubscriptionManagers } from './subscription-managers';

const MANAGER = new Interface(SubscriptionManagerAbi);
const ERC20 = new Interface(TestStablecoinAbi);
/**
 * How long after `expires_at` the operator's SubscribeAuthorization stays valid on chain. SPEC completes an expired or
 * cancelled intent when an already-broadcast subscribe later confirms: an authorization issued just before expiry
 * still needs the approval mined and the subscribe sent and mined, and without the grace that subscribe would revert
 * (SignatureExpired) at the customer's cost. The chain cannot tell when it was broadcast, so one sent within the grace
 * lands too (docs/subscriptions.md, Subscribe call).
 */
export const SUBSCRIBE_DEADLINE_GRACE_SECONDS = 15 * 60;

const sameAddress = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

/** A decoded log as the indexer would publish it (uints decimal, addresses checksummed, bytes32 lower-case). */
export function decodeManagerLog(log: Log): { event: string; args: Record<string, string> } | null {
  let parsed;
  try {
    parsed = MANAGER.parseLog({ topics: [...log.topics], data: log.data });
  } catch {
    return null;
  }
  if (!parsed) return null;
  const args: Record<string, string> = {};
  parsed.fragment.inputs.forEach((input, i) => {
    const v: unknown = parsed.args[i];
    args[input.name] =
      typeof v === 'string' ? (input.type === 'address' ? getAddress(v) : v.toLowerCase()) : String(v);
  });
  return { event: parsed.name, args };
}

/**
 * POST /subscription-checkouts/:id/subscribe in the owning service: authorize (deploy the manager when first needed,
 * convert at one rate, sign the operator's SubscribeAuthorization naming the subscriber) or report (read the
 * receipt, record the subscription and its first charge: the API write path).
 */
@Injectable()
export class SubscribeFlow {
  constructor(
    @Inject(SubscriptionCheckoutReader) private readonly checkouts: SubscriptionCheckoutReader,
    @Inject(SubscriptionCheckoutPresenter) private readonly presenter: SubscriptionCheckoutPresenter,
    @Inject(SubscriptionManagers) private readonly managers: SubscriptionManagers,
    @Inject(OperatorRelayers) private readonly relayers: OperatorRelayers,
    @Inject(ChainTime) private readonly chains: ChainTime,
    @Inject(SubscriptionChainFacts) private readonly facts: SubscriptionChainFacts,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(MerchantProfiles) private readonly profiles: MerchantProfiles,
    @Inject(ChainObservationLog) private readonly observations: ChainObservationLog,
  ) {}

  async handle(command: SubscribeCommand): Promise<SubscribeAuthorizationResource | SubscribeReported> {
    const row = await this.checkouts.find(command.checkoutId);
    if (!row) throw notFound('subscription_checkout', command.checkoutId);
    // An intent of the other mode than the chains' (recorded before create refused them): no manager is deployed,
    // no registration sent, no authorization signed and no receipt recorded for it.
    assertChainModeServed(this.presenter.chainMode, row.mode);
    if (!row.object.supported_chains.includes(command.chain))
      throw validationError(
        'chain',
        `${command.chain} is not one of this subscription checkout's supported_chains.`,
        'unsupported_chain',
      );
    const chain = this.chains.chain(row.mode, command.chain);
    if (!chain) throw validationError('chain', `${command.chain} is not offered.`, 'unsupported_chain');
    const token = chain.stablecoins.find((t) => t.assetId.toLowerCase() === command.asset.toLowerCase());
    if (!token)
      throw validationError(
        'asset',
        `${command.asset} is not a stablecoin offered on ${command.chain}.`,
        'unsupported_asset',
      );
    // A token contract cannot sign the approval nor hold its own balance to be charged.
    if (sameAddress(command.subscriber, token.address))
      throw validationError(
        'subscriber',
        `subscriber must be the wallet that pays, not the ${token.symbol} token contract itself.`,
        'invalid_address',
      );
    // SPEC: only the subscriber can raise cap and budget, a merchant key only charges within them; the manager holds
    // nothing to be charged, and a merchant paying its own settlement address would record revenue nobody paid.
    const own = (await this.managers.merchantAddresses(row.merchant_id, command.chain)).find((a) =>
      sameAddress(a.address, command.subscriber),
    );
    if (own)
      throw cannotProcess(
        'subscriber_is_merchant_address',
        `subscriber must be the customer's wallet, not the merchant's own ${own.role} (${getAddress(own.address)}).`,
        'subscriber',
      );
    return command.txHash
      ? this.report(row, command, command.txHash)
      : this.authorize(row, command, chain.chainId, token);
  }

  private async authorize(
    row: SubscriptionCheckoutRow,
    command: SubscribeCommand,
    chainId: bigint,
    token: { address: string; assetId: string; symbol: string; decimals: number },
  ): Promise<SubscribeAuthorizationResource> {
    const o = row.object;
    const now = this.clock.now();
    if (o.status !== 'pending') throw notPending(row.id, o.status);
    if (now.getTime() >= Date.parse(o.expires_at)) throw notPending(row.id, 'expired');
    // The first charge of a fiat-priced plan is a payout of a fiat-settled business (SPEC fiat field rule 3): nothing
    // is signed once its configuration no longer pays out in the plan's currency (changed after the intent was
    // created). Only this step: a subscribe already on chain is still recorded by the report, on-chain truth wins.
    if (o.price_currency !== null) {
      const { settlement } = await this.profiles.get(row.merchant_id);
      if (settlement.mode === 'fiat') requireFiatPayoutDestination(settlement, o.price_currency);
    }
    const rates = await this.presenter.quote(o.price_currency);
    const option = subscriptionOptions(o, this.presenter.offeredChains(row.mode), rates).find(
      (opt) => opt.chain === command.chain && opt.asset.toLowerCase() === token.assetId.toLowerCase(),
    );
    if (!option)
      throw cannotProcess(
        'price_currency_not_quotable',
        `No rate quotes ${o.price_currency ?? 'the price'} against ${token.symbol} now.`,
      );
    // Nothing is signed that the chain would pay to a settlement address the merchant has replaced.
    const changePending = await this.managers.pendingMerchantChange(row.merchant_id, row.mode, command.chain);
    if (changePending) throw changePending;
    const manager = await this.managers.ensureDeployed(row.merchant_id, row.mode, command.chain);
    const subscriber = getAddress(command.subscriber);
    const deadline = BigInt(Math.floor(Date.parse(o.expires_at) / 1000) + SUBSCRIBE_DEADLINE_GRACE_SECONDS);
    const message: SubscribeAuthorizationMessage = {
      subscriptionId: o.onchain_id.toLowerCase(),
      subscriber,
      token: getAddress(token.address),
      cap: BigInt(option.cap_amount),
      budget: BigInt(option.budget_amount),
      periodDuration: BigInt(o.period_duration),
      firstChargeAmount: BigInt(option.price_amount),
      deadline,
    };
    const managerAddress = getAddress(manager.address);
    const operator = new Wallet(this.relayers.operatorKey);
    const signature = await operator.signTypedData(
      stablepayDomain(chainId, managerAddress),
      typesFor('SubscribeAuthorization'),
      { ...message },
    );
    const authorization = {
      subscriptionId: message.subscriptionId,
      subscriber,
      token: message.token,
      cap: message.cap.toString(),
      budget: message.budget.toString(),
      periodDuration: message.periodDuration.toString(),
      firstChargeAmount: message.firstChargeAmount.toString(),
      deadline: deadline.toString(),
    };
    return {
      object: 'subscribe_authorization',
      subscription_checkout_id: row.id,
      subscription_id: message.subscriptionId,
      chain: command.chain,
      chain_id: Number(chainId),
      asset: token.assetId,
      token_address: message.token,
      token_symbol: token.symbol,
      token_decimals: token.decimals,
      subscriber,
      manager_address: managerAddress,
      price_amount: option.price_amount,
      cap_amount: option.cap_amount,
      budget_amount: option.budget_amount,
      first_charge_amount: option.price_amount,
      rate: {
        value: option.rate,
        currency: option.rate_currency,
        as_of: option.rate_as_of,
        source: option.rate_source,
      },
      authorization,
      operator_signature: signature,
      approval: { token: message.token, spender: managerAddress, amount: MaxUint256.toString() },
      transactions: [
        {
          to: message.token,
          data: ERC20.encodeFunctionData('approve', [managerAddress, MaxUint256]),
          value: '0',
        },
        {
          to: managerAddress,
          data: MANAGER.encodeFunctionData('subscribe', [message, signature]),
          value: '0',
        },
      ],
    };
  }

  private async report(
    row: SubscriptionCheckoutRow,
    command: SubscribeCommand,
    txHash: string,
  ): Promise<SubscribeReported> {
    const onchainId = row.object.onchain_id.toLowerCase();
    const pending: SubscribeReported = {
      object: 'subscribe_result',
      status: 'pending',
      subscription_checkout_id: row.id,
      tx_hash: txHash,
      subscriptionId: onchainId,
      revision: null,
    };
    const manager = await this.managers.find(row.merchant_id, command.chain);
    if (!manager) throw mismatch('The merchant has no subscription manager on this chain.');
    const provider = this.chains.provider(row.mode, command.chain);
    if (!provider)
      throw new DomainError({
        type: 'api_error',
        status: 503,
        code: 'chain_unavailable',
        message: `No RPC endpoint is configured for ${command.chain}.`,
      });
    const receipt = await fromChain(command.chain, waitForSubscribeReceipt(provider, txHash));
    if (receipt === 'unknown')
      throw new DomainError({
        type: 'invalid_request',
        status: 404,
        code: 'transaction_not_found',
        param: 'tx_hash',
        message: `${command.chain} does not know transaction ${txHash}.`,
      });
    if (receipt === 'pending') return pending;
    if (receipt.status !== 1)
      throw cannotProcess('subscribe_transaction_reverted', `Transaction ${txHash} reverted.`, 'tx_hash');
    const ours = receipt.logs
      .filter((l) => sameAddress(l.address, manager.address))
      .map((l) => ({ log: l, decoded: decodeManagerLog(l) }))
      .filter((x) => x.decoded?.args['subscriptionId'] === onchainId);
    const created = ours.find((x) => x.decoded?.event === 'SubscriptionCreated');
    if (!created?.decoded || !sameAddress(created.decoded.args['subscriber'] ?? '', command.subscriber))
      throw mismatch(
        `Transaction ${txHash} holds no subscribe of this subscription checkout by ${command.subscriber}.`,
      );
    const block = await fromChain(command.chain, provider.getBlock(receipt.blockNumber));
    const blockTime = new Date(Number(block?.timestamp ?? 0) * 1000).toISOString();
    let revision: number | null = null;
    for (const { log, decoded } of ours) {
      if (!decoded) continue;
      const managerLog: ManagerLog = {
        chain: command.chain,
        contract: manager.address,
        event: decoded.event,
        args: decoded.args,
        txHash: txHash,
        blockNumber: String(receipt.blockNumber),
        blockTime,
      };
      // Kept before the fact, as the indexer's observations are: a reorg that takes this block out before the
      // indexer has read it is found by the receipt check (SubscriptionReceiptChecks), which undoes the fact.
      await this.observations.rememberReceipt({ ...managerLog, blockHash: receipt.blockHash }, log.index);
      const r = await this.facts.record(managerLog, 'api', `receipt:${txHash}:${log.index}`);
      if (r !== null) revision = r;
    }
    this.chains.invalidate(row.mode, command.chain);
    return { ...pending, status: 'recorded', revision };
  }
}

/** How long a report waits for its transaction's receipt before answering 202 pending. */
export const RECEIPT_WAIT_MS = 30_000;
/** A hash the node has never seen this long after the report is not coming: 404 transaction_not_found. */
export const UNSEEN_GRACE_MS = 5_000;
const SEEN_POLL_MS = 200;
// The report is public (the intent id is the capability) and a made-up hash is free: polled every 200 ms through the
// grace it cost ~50 RPC calls per request, at up to 128 such requests in flight per source.
const UNSEEN_POLL_MS = 1_000;

/**
 * The receipt of a reported subscribe transaction: the receipt once mined, `pending` when the node knows the
 * transaction but it was not mined within RECEIPT_WAIT_MS, `unknown` when the node has not seen it within
 * UNSEEN_GRACE_MS. A known transaction is polled every 200 ms, an unseen hash once a second.
 */
export async function waitForSubscribeReceipt(
  provider: Pick<Provider, 'getTransaction' | 'getTransactionReceipt'>,
  txHash: string,
  timing: { now(): number; sleep(ms: number): Promise<void> } = {
    now: () => Date.now(),
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  },
): Promise<TransactionReceipt | 'pending' | 'unknown'> {
  const started = timing.now();
  let seen = false;
  for (;;) {
    const receipt = await provider.getTransactionReceipt(txHash);
    if (receipt) return receipt;
    seen ||= (await provider.getTransaction(txHash)) !== null;
    const waited = timing.now() - started;
    if (!seen && waited >= UNSEEN_GRACE_MS) return 'unknown';
    if (waited >= RECEIPT_WAIT_MS) return 'pending';
    await timing.sleep(seen ? SEEN_POLL_MS : UNSEEN_POLL_MS);
  }
}

function notPending(id: string, status: string): DomainError {
  return conflict(
    'subscription_checkout_not_pending',
    `Subscription checkout ${id} is ${status}; only a pending subscription checkout can be subscribed to.`,
  );
}

const mismatch = (message: string) => cannotProcess('subscribe_transaction_mismatch', message, 'tx_hash');
