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
  REFUND_TYPES,
  RESCUE_TYPES,
  SUBSCRIBE_AUTHORIZATION_TYPES,
  stablepayDomain,
  type CancelSubscriptionMessage,
  type CaptureMessage,
  type ChargeMessage,
  type RefundMessage,
  type RescueMessage,
  type SubscribeAuthorizationMessage,
} from '@stablepay/evm';
import { deployStablepay, type StablepayAddresses } from '../deployment';
import { decodeStablepayError, type DecodedContractError } from '../errors';
import { connectPaymentFactory, type PaymentFactoryContract } from '../generated/PaymentFactory';
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
  readonly managerFactory: SubscriptionManagerFactoryContract;
  readonly manager: SubscriptionManagerContract;
  readonly usdc: TestStablecoinContract;
  readonly dai: TestStablecoinContract;
}

export const MERCHANT_ID = id('merchant:acme');
export const FAR_DEADLINE = 4_000_000_000n;

/** Deploys the whole system deterministically on `chain`, registers one merchant and deploys its manager. */
export async function deployFixture(chain: TestChain): Promise<Fixture> {
  const operator = chain.account(0);
  const operatorPauser = chain.account(1);
  const merchantPauser = chain.account(2);
  const merchantSigner = new Wallet(keccak256(toUtf8Bytes('stablepay test merchant signer')));
  const settlement = chain.account(7).address;
  const deployment = await deployStablepay(
    operator,
    { operator: operator.address, operatorPauser: operatorPauser.address },
    { testStablecoins: true },
  );
  const { addresses } = deployment;
  const tokens = deployment.testStablecoins;
  if (!tokens) throw new Error('test stablecoins missing');
  const registry = connectStablepayRegistry(addresses.registry, operator);
  await mined(registry.setMerchant(MERCHANT_ID, merchantSigner.address, settlement));
  const managerFactory = connectSubscriptionManagerFactory(addresses.subscriptionManagerFactory, operator);
  await mined(managerFactory.deployManager(MERCHANT_ID, merchantPauser.address));
  const managerAddress = await managerFactory.managerOf(MERCHANT_ID);
  return {
    chain,
    chainId: BigInt(chain.chainId),
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
  m: ChargeMessage,
): Promise<string> {
  return s.signTypedData(stablepayDomain(chainId, manager), CHARGE_TYPES, m);
}
export function signCancel(
  s: TypedSigner,
  chainId: bigint,
  manager: string,
  m: CancelSubscriptionMessage,
): Promise<string> {
  return s.signTypedData(stablepayDomain(chainId, manager), CANCEL_SUBSCRIPTION_TYPES, m);
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
  m: CaptureMessage,
): Promise<string> {
  return s.signTypedData(stablepayDomain(chainId, deposit), CAPTURE_TYPES, m);
}
export function signRefund(
  s: TypedSigner,
  chainId: bigint,
  deposit: string,
  m: RefundMessage,
): Promise<string> {
  return s.signTypedData(stablepayDomain(chainId, deposit), REFUND_TYPES, m);
}
export function signRescue(
  s: TypedSigner,
  chainId: bigint,
  deposit: string,
  m: RescueMessage,
): Promise<string> {
  return s.signTypedData(stablepayDomain(chainId, deposit), RESCUE_TYPES, m);
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
