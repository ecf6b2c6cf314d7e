import {
  Wallet,
  id,
  keccak256,
  toUtf8Bytes,
  type Addressable,
  type ContractTransactionReceipt,
  type ContractTransactionResponse,
  type HDNodeWallet,
  type Interface,
} from 'ethers';
import {
  CANCEL_SUBSCRIPTION_TYPES,
  CAPTURE_TYPES,
  CHARGE_TYPES,
  DISPUTE_PAYER_TYPES,
  MERCHANT_CHANGE_TYPES,
  PAYOUT_REFUND_TYPES,
  REFUND_TYPES,
  RESCUE_TYPES,
  REVOKE_AUTHORIZATIONS_TYPES,
  SUBSCRIBE_AUTHORIZATION_TYPES,
  stablepayDomain,
  type CancelSubscriptionMessage,
  type CaptureMessage,
  type ChargeMessage,
  type DisputePayerMessage,
  type MerchantChangeMessage,
  type PayoutRefundMessage,
  type RefundMessage,
  type RescueMessage,
  type RevokeAuthorizationsMessage,
  type SubscribeAuthorizationMessage,
} from '@stablepay/evm';
import { deployStablepay, type StablepayAddresses } from '../deployment';
import { decodeStablepayError, type DecodedContractError } from '../errors';
import { connectPaymentFactory, type PaymentFactoryContract } from '../generated/PaymentFactory';
import {
  connectPayoutDepositFactory,
  type PayoutDepositFactoryContract,
} from '../generated/PayoutDepositFactory';
import { connectStablepayRegistry, type StablepayRegistryContract } from '../generated/StablepayRegistry';
import {
  connectSubscriptionManager,
  type SubscriptionManagerContract,
} from '../generated/SubscriptionManager';
import {
  connectSubscriptionManagerFactory,
  type SubscriptionManagerFactoryContract,
} from '../generated/SubscriptionManagerFactory';
import { connectTestStablecoin, type TestStablecoinContract } from '../generated/TestStablecoin';
import type { TestChain } from './anvil';

export interface Fixture {
  readonly chain: TestChain;
  readonly chainId: bigint;
  /** The registry admin (cold key). */
  readonly admin: HDNodeWallet;
  /** The hot relayer key. */
  readonly operator: HDNodeWallet;
  readonly operatorPauser: HDNodeWallet;
  readonly merchantPauser: HDNodeWallet;
  readonly subscriber: HDNodeWallet;
  readonly newWallet: HDNodeWallet;
  readonly payer: HDNodeWallet;
  readonly relayer: HDNodeWallet;
  readonly stranger: HDNodeWallet;
  /** The merchant's signing key (never sends transactions). */
  readonly merchantSigner: Wallet;
  /** The merchant's settlement address. */
  readonly settlement: string;
  readonly merchantId: string;
  readonly addresses: StablepayAddresses;
  readonly registry: StablepayRegistryContract;
  readonly paymentFactory: PaymentFactoryContract;
  readonly payoutFactory: PayoutDepositFactoryContract;
  readonly managerFactory: SubscriptionManagerFactoryContract;
  readonly manager: SubscriptionManagerContract;
  readonly usdc: TestStablecoinContract;
  readonly dai: TestStablecoinContract;
}

export const MERCHANT_ID = id('merchant:acme');
/**
 * A deadline `seconds` after the latest block, well inside the contracts' 7-day horizon (MAX_SIGNATURE_HORIZON).
 * Read it once per signature and reuse the value for the call.
 */
export async function soon(f: { readonly chain: TestChain }, seconds = 86_400n): Promise<bigint> {
  const block = await f.chain.provider.getBlock('latest');
  if (!block) throw new Error('no latest block');
  return BigInt(block.timestamp) + seconds;
}

/** Messages as the tests write them: the merchant epoch defaults to 0 (no revocation yet). */
type WithEpoch<M extends { readonly epoch: bigint }> = Omit<M, 'epoch'> & { readonly epoch?: bigint };
const withEpoch = <M extends { readonly epoch?: bigint }>(m: M) => ({ ...m, epoch: m.epoch ?? 0n });

/** Deploys the whole system deterministically on `chain`, registers one merchant and deploys its manager. */
export async function deployFixture(chain: TestChain): Promise<Fixture> {
  const operator = chain.account(0);
  const admin = chain.account(9);
  const operatorPauser = chain.account(1);
  const merchantPauser = chain.account(2);
  const merchantSigner = new Wallet(keccak256(toUtf8Bytes('stablepay test merchant signer')));
  const settlement = chain.account(7).address;
  const deployment = await deployStablepay(
    operator,
    { admin: admin.address, operator: operator.address, operatorPauser: operatorPauser.address },
    { testStablecoins: true },
  );
  const { addresses } = deployment;
  const tokens = deployment.testStablecoins;
  if (!tokens) throw new Error('test stablecoins missing');
  const registry = connectStablepayRegistry(addresses.registry, operator);
  await mined(registry.registerMerchant(MERCHANT_ID, merchantSigner.address, settlement));
  const managerFactory = connectSubscriptionManagerFactory(addresses.subscriptionManagerFactory, operator);
  await mined(managerFactory.deployManager(MERCHANT_ID, merchantPauser.address));
  const managerAddress = await managerFactory.managerOf(MERCHANT_ID);
  return {
    chain,
    chainId: BigInt(chain.chainId),
    admin,
    operator,
    operatorPauser,
    merchantPauser,
    subscriber: chain.account(3),
    newWallet: chain.account(4),
    payer: chain.account(5),
    relayer: chain.account(6),
    stranger: chain.account(8),
    merchantSigner,
    settlement,
    merchantId: MERCHANT_ID,
    addresses,
    registry,
    paymentFactory: connectPaymentFactory(addresses.paymentFactory, operator),
    payoutFactory: connectPayoutDepositFactory(addresses.payoutDepositFactory, operator),
    managerFactory,
    manager: connectSubscriptionManager(managerAddress, chain.account(6)),
    usdc: connectTestStablecoin(tokens.USDC, operator),
    dai: connectTestStablecoin(tokens.DAI, operator),
  };
}

/** Sends and waits; throws on a failed receipt. */
export async function mined(tx: Promise<ContractTransactionResponse>): Promise<ContractTransactionReceipt> {
  const receipt = await (await tx).wait();
  if (!receipt || receipt.status !== 1) throw new Error('transaction failed');
  return receipt;
}

/**
 * Awaits `action`, which must revert with the Stablepay custom error `name`; returns the decoded error.
 * (ethers fails a reverting transaction at gas estimation; its revert data decodes here.)
 */
export async function expectRevert(action: Promise<unknown>, name: string): Promise<DecodedContractError> {
  let caught: unknown;
  try {
    await action;
  } catch (e) {
    caught = e;
  }
  if (caught === undefined) throw new Error(`expected a revert with ${name}, but it succeeded`);
  const decoded = decodeStablepayError(caught);
  if (!decoded)
    throw new Error(`expected a revert with ${name}, got an undecodable error: ${String(caught)}`);
  if (decoded.name !== name) {
    throw new Error(
      `expected a revert with ${name}, got ${decoded.name}(${JSON.stringify(decoded.args, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))})`,
    );
  }
  return decoded;
}

// --------------------------------------------------------------------------- EIP-712 signing, per @stablepay/evm

export type TypedSigner = Pick<Wallet, 'signTypedData'>;

export function signCharge(
  s: TypedSigner,
  chainId: bigint,
  manager: string,
  m: WithEpoch<ChargeMessage>,
): Promise<string> {
  return s.signTypedData(stablepayDomain(chainId, manager), CHARGE_TYPES, withEpoch(m));
}
export function signCancel(
  s: TypedSigner,
  chainId: bigint,
  manager: string,
  m: WithEpoch<CancelSubscriptionMessage>,
): Promise<string> {
  return s.signTypedData(stablepayDomain(chainId, manager), CANCEL_SUBSCRIPTION_TYPES, withEpoch(m));
}
export function signSubscribe(
  s: TypedSigner,
  chainId: bigint,
  manager: string,
  m: SubscribeAuthorizationMessage,
): Promise<string> {
  return s.signTypedData(stablepayDomain(chainId, manager), SUBSCRIBE_AUTHORIZATION_TYPES, m);
}
export function signCapture(
  s: TypedSigner,
  chainId: bigint,
  deposit: string,
  m: WithEpoch<CaptureMessage>,
): Promise<string> {
  return s.signTypedData(stablepayDomain(chainId, deposit), CAPTURE_TYPES, withEpoch(m));
}
export function signRefund(
  s: TypedSigner,
  chainId: bigint,
  deposit: string,
  m: WithEpoch<RefundMessage>,
): Promise<string> {
  return s.signTypedData(stablepayDomain(chainId, deposit), REFUND_TYPES, withEpoch(m));
}
export function signRescue(
  s: TypedSigner,
  chainId: bigint,
  deposit: string,
  m: WithEpoch<RescueMessage>,
): Promise<string> {
  return s.signTypedData(stablepayDomain(chainId, deposit), RESCUE_TYPES, withEpoch(m));
}
export function signPayoutRefund(
  s: TypedSigner,
  chainId: bigint,
  deposit: string,
  m: WithEpoch<PayoutRefundMessage>,
): Promise<string> {
  return s.signTypedData(stablepayDomain(chainId, deposit), PAYOUT_REFUND_TYPES, withEpoch(m));
}

export function signDisputePayer(
  s: TypedSigner,
  chainId: bigint,
  deposit: string,
  m: WithEpoch<DisputePayerMessage>,
): Promise<string> {
  return s.signTypedData(stablepayDomain(chainId, deposit), DISPUTE_PAYER_TYPES, withEpoch(m));
}
export function signMerchantChange(
  s: TypedSigner,
  chainId: bigint,
  registry: string,
  m: WithEpoch<MerchantChangeMessage>,
): Promise<string> {
  return s.signTypedData(stablepayDomain(chainId, registry), MERCHANT_CHANGE_TYPES, withEpoch(m));
}
export function signRevokeAuthorizations(
  s: TypedSigner,
  chainId: bigint,
  registry: string,
  m: WithEpoch<RevokeAuthorizationsMessage>,
): Promise<string> {
  return s.signTypedData(stablepayDomain(chainId, registry), REVOKE_AUTHORIZATIONS_TYPES, withEpoch(m));
}

/** Rotates the merchant's signer and/or settlement address with the current signer's consent (epoch bumps). */
export async function changeMerchant(f: Fixture, signer: string, settlement: string): Promise<void> {
  const deadline = await soon(f);
  const epoch = await f.registry.merchantEpoch(f.merchantId);
  const sig = await signMerchantChange(f.merchantSigner, f.chainId, f.addresses.registry, {
    merchantId: f.merchantId,
    signer,
    settlement,
    epoch,
    deadline,
  });
  await mined(f.registry.connect(f.relayer).changeMerchant(f.merchantId, signer, settlement, deadline, sig));
}

/** The decoded arguments of every `name` event emitted by `address` in `receipt`. */
export function eventsIn<E, K extends keyof E & string>(
  receipt: ContractTransactionReceipt,
  contract: { readonly interface: Interface; readonly target: string | Addressable },
  name: K,
): E[K][] {
  const out: E[K][] = [];
  const target = typeof contract.target === 'string' ? contract.target.toLowerCase() : undefined;
  for (const log of receipt.logs) {
    if (target !== undefined && log.address.toLowerCase() !== target) continue;
    const parsed = contract.interface.parseLog(log);
    if (parsed?.name === name) out.push(parsed.args.toObject(true) as E[K]);
  }
  return out;
}

/** Exactly one `name` event from `contract` in `receipt`. */
export function eventIn<E, K extends keyof E & string>(
  receipt: ContractTransactionReceipt,
  contract: { readonly interface: Interface; readonly target: string | Addressable },
  name: K,
): E[K] {
  const all = eventsIn<E, K>(receipt, contract, name);
  const [first] = all;
  if (all.length !== 1 || first === undefined)
    throw new Error(`expected one ${name} event, found ${all.length}`);
  return first;
}

export async function blockTimestamp(receipt: ContractTransactionReceipt): Promise<bigint> {
  const block = await receipt.getBlock();
  return BigInt(block.timestamp);
}
