import {
  concat,
  getAddress,
  getCreate2Address,
  getCreateAddress,
  id,
  isHexString,
  keccak256,
  AbiCoder,
  type BytesLike,
  type Provider,
  type Signer,
} from 'ethers';
import { paymentFactoryInitCode } from './generated/PaymentFactory';
import { payoutDepositFactoryInitCode } from './generated/PayoutDepositFactory';
import { stablepayRegistryInitCode } from './generated/StablepayRegistry';
import { subscriptionManagerFactoryInitCode } from './generated/SubscriptionManagerFactory';
import { subscriptionManagerInitCode } from './generated/SubscriptionManager';
import { testStablecoinInitCode } from './generated/TestStablecoin';

/**
 * The deterministic deployment proxy (Arachnid's CREATE2 factory): the same address and code on Ethereum, Base,
 * Polygon, Arbitrum, Optimism and most EVM chains (and built into anvil). A call with data `salt ++ initCode`
 * deploys `initCode` at CREATE2(proxy, salt, keccak256(initCode)). Deploying every Stablepay root contract through
 * it gives them one address on every chain: whoever deploys on a new chain (us, or anyone) gets our contract,
 * with our constructor arguments, at our address, so a counterfactual deposit address can never be squatted.
 */
export const DETERMINISTIC_DEPLOYER = '0x4e59b44847b379578588920cA78FbF26c0B4956C';
export const DETERMINISTIC_DEPLOYER_RUNTIME_CODE =
  '0x7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffe03601600081602082378035828234f58015156039578182fd5b8082525050506014600cf3';

/** The CREATE2 salt every Stablepay root contract is deployed with (v1 of the deployment). */
export const STABLEPAY_DEPLOYMENT_SALT = id('stablepay.deployment.v1');

/** The keys the root contracts are constructed with; they are part of every address below. */
export interface StablepayRoles {
  /**
   * The cold key: sets the operator and the operator pauser, proposes (delayed, merchant-cancellable) changes of a
   * registered merchant, re-attests a disputed payer. Never the operator.
   */
  readonly admin: string;
  /**
   * The service's hot relayer key: deploys deposits and managers, registers new merchants, flags, recovers,
   * submits rescues, signs subscribe terms.
   */
  readonly operator: string;
  /** The operator's own pauser of subscription managers. */
  readonly operatorPauser: string;
}

export interface StablepayAddresses {
  readonly deterministicDeployer: string;
  readonly registry: string;
  readonly paymentFactory: string;
  readonly depositImplementation: string;
  readonly subscriptionManagerFactory: string;
  /** Payouts (beta): one deposit address per customer (`payoutDepositAddress`). */
  readonly payoutDepositFactory: string;
  readonly payoutDepositImplementation: string;
}

export const TEST_STABLECOINS = [
  { symbol: 'USDC', name: 'USD Coin (Stablepay test)', decimals: 6 },
  { symbol: 'USDT', name: 'Tether USD (Stablepay test)', decimals: 6 },
  { symbol: 'DAI', name: 'Dai Stablecoin (Stablepay test)', decimals: 18 },
] as const;
export type TestStablecoinSymbol = (typeof TEST_STABLECOINS)[number]['symbol'];

/** Where `initCode` lands when deployed through the deterministic deployment proxy with `salt`. */
export function deterministicAddress(initCode: BytesLike, salt: string = STABLEPAY_DEPLOYMENT_SALT): string {
  return getCreate2Address(DETERMINISTIC_DEPLOYER, salt, keccak256(initCode));
}

/** The init codes of the root contracts, in deployment order. */
export function stablepayInitCodes(roles: StablepayRoles): {
  readonly registry: string;
  readonly paymentFactory: string;
  readonly subscriptionManagerFactory: string;
  readonly payoutDepositFactory: string;
} {
  if (getAddress(roles.admin) === getAddress(roles.operator)) {
    throw new Error('the registry admin must be another key than the operator (the hot relayer key)');
  }
  const registryInit = stablepayRegistryInitCode(
    getAddress(roles.admin),
    getAddress(roles.operator),
    getAddress(roles.operatorPauser),
  );
  const registry = deterministicAddress(registryInit);
  return {
    registry: registryInit,
    paymentFactory: paymentFactoryInitCode(registry),
    subscriptionManagerFactory: subscriptionManagerFactoryInitCode(registry),
    payoutDepositFactory: payoutDepositFactoryInitCode(registry),
  };
}

/** Every root contract address, computed offline: identical on every chain. */
export function computeStablepayAddresses(roles: StablepayRoles): StablepayAddresses {
  const init = stablepayInitCodes(roles);
  const paymentFactory = deterministicAddress(init.paymentFactory);
  const payoutDepositFactory = deterministicAddress(init.payoutDepositFactory);
  return {
    deterministicDeployer: DETERMINISTIC_DEPLOYER,
    registry: deterministicAddress(init.registry),
    paymentFactory,
    // The factory's constructor creates the implementation: its first CREATE (a contract starts at nonce 1).
    depositImplementation: getCreateAddress({ from: paymentFactory, nonce: 1 }),
    subscriptionManagerFactory: deterministicAddress(init.subscriptionManagerFactory),
    payoutDepositFactory,
    payoutDepositImplementation: getCreateAddress({ from: payoutDepositFactory, nonce: 1 }),
  };
}

export function testStablecoinInitCodeFor(symbol: TestStablecoinSymbol): string {
  const def = TEST_STABLECOINS.find((t) => t.symbol === symbol);
  if (!def) throw new Error(`unknown test stablecoin ${symbol}`);
  return testStablecoinInitCode(def.name, def.symbol, def.decimals);
}

/** The test stablecoins' addresses (same on every local chain; they do not depend on any key). */
export function computeTestStablecoinAddresses(): Record<TestStablecoinSymbol, string> {
  const out: Partial<Record<TestStablecoinSymbol, string>> = {};
  for (const t of TEST_STABLECOINS) out[t.symbol] = deterministicAddress(testStablecoinInitCodeFor(t.symbol));
  return out as Record<TestStablecoinSymbol, string>;
}

/** EIP-1167 clone init code of the deposit implementation (fixed: no token, payer or amount in it). */
export function depositCloneInitCode(depositImplementation: string): string {
  return concat([
    '0x3d602d80600a3d3981f3363d3d373d3d3d363d73',
    getAddress(depositImplementation),
    '0x5af43d82803e903d91602b57fd5bf3',
  ]);
}

const abi = AbiCoder.defaultAbiCoder();

/** The CREATE2 salt of a payment's deposit contract: binds the merchant and the payment id. */
export function depositSalt(merchantId: string, paymentId: string): string {
  return keccak256(abi.encode(['bytes32', 'bytes32'], [merchantId, paymentId]));
}

/** A payment's deposit address, known before anything is deployed; the same on every chain. */
export function computeDepositAddress(paymentFactory: string, merchantId: string, paymentId: string): string {
  const implementation = getCreateAddress({ from: paymentFactory, nonce: 1 });
  return getCreate2Address(
    paymentFactory,
    depositSalt(merchantId, paymentId),
    keccak256(depositCloneInitCode(implementation)),
  );
}

/** The CREATE2 salt of a payout customer's deposit contract: binds the merchant, the customer and the off-ramp. */
export function payoutDepositSalt(merchantId: string, customerId: string, offRamp: string): string {
  return keccak256(
    abi.encode(['bytes32', 'bytes32', 'address'], [merchantId, customerId, getAddress(offRamp)]),
  );
}

export interface PayoutDepositAddressInput {
  /** The PayoutDepositFactory (`StablepayAddresses.payoutDepositFactory`). */
  readonly factory: string;
  /** The off-ramp's receiving address every sweep from this address goes to; part of the address. */
  readonly offRamp: string;
  /** Service ids, mapped to bytes32 with `toOnChainId` (a 32-byte hex id is kept, anything else hashed). */
  readonly merchantId: string;
  readonly customerId: string;
}

/**
 * A payout customer's deposit address (Payouts, beta): valid on every supported EVM chain, known before anything
 * is deployed, and equal to `PayoutDepositFactory.depositAddress(toOnChainId(merchantId), toOnChainId(customerId),
 * offRamp)`. Pure: no I/O.
 */
export function payoutDepositAddress(input: PayoutDepositAddressInput): string {
  const factory = getAddress(input.factory);
  const implementation = getCreateAddress({ from: factory, nonce: 1 });
  return getCreate2Address(
    factory,
    payoutDepositSalt(toOnChainId(input.merchantId), toOnChainId(input.customerId), input.offRamp),
    keccak256(depositCloneInitCode(implementation)),
  );
}

/** The merchant's SubscriptionManager address: binds the merchant and its pauser. */
export function computeSubscriptionManagerAddress(
  subscriptionManagerFactory: string,
  registry: string,
  merchantId: string,
  merchantPauser: string,
): string {
  const salt = keccak256(abi.encode(['bytes32', 'address'], [merchantId, merchantPauser]));
  const initCode = subscriptionManagerInitCode(registry, merchantId, merchantPauser);
  return getCreate2Address(subscriptionManagerFactory, salt, keccak256(initCode));
}

/**
 * A 32-byte on-chain id for a service id (merchant id, payment id, subscription id): a 0x-prefixed 32-byte hex
 * string is kept as is, anything else is hashed (keccak256 of its UTF-8 bytes).
 */
export function toOnChainId(value: string): string {
  return isHexString(value, 32) ? value.toLowerCase() : id(value);
}

export interface DeterministicDeployResult {
  readonly address: string;
  /** false when the code was already there (nothing sent). */
  readonly deployed: boolean;
  readonly txHash?: string;
  readonly gasUsed?: bigint;
}

async function hasCode(provider: Provider, address: string): Promise<boolean> {
  return (await provider.getCode(address)) !== '0x';
}

/** Deploys `initCode` through the deterministic deployment proxy unless its address already holds code. */
export async function deployDeterministic(
  signer: Signer,
  initCode: string,
  salt: string = STABLEPAY_DEPLOYMENT_SALT,
): Promise<DeterministicDeployResult> {
  const provider = signer.provider;
  if (!provider) throw new Error('deployDeterministic: the signer has no provider');
  const address = deterministicAddress(initCode, salt);
  if (await hasCode(provider, address)) return { address, deployed: false };
  if (!(await hasCode(provider, DETERMINISTIC_DEPLOYER))) {
    throw new Error(
      `the deterministic deployment proxy is missing at ${DETERMINISTIC_DEPLOYER} on this chain: install it first (presigned transaction, or anvil_setCode on a local chain)`,
    );
  }
  const tx = await signer.sendTransaction({ to: DETERMINISTIC_DEPLOYER, data: concat([salt, initCode]) });
  const receipt = await tx.wait();
  if (!receipt || receipt.status !== 1 || !(await hasCode(provider, address))) {
    throw new Error(`deterministic deployment to ${address} failed (tx ${tx.hash})`);
  }
  return { address, deployed: true, txHash: tx.hash, gasUsed: receipt.gasUsed };
}

export interface StablepayDeployment {
  readonly addresses: StablepayAddresses;
  /** Present when deployed with testStablecoins: true (local chains only). */
  readonly testStablecoins?: Record<TestStablecoinSymbol, string>;
}

/**
 * Deploys (idempotently) the registry, the payment factory (with its deposit implementation), the subscription
 * manager factory and the payout deposit factory (with its implementation) through the deterministic deployment proxy, plus the test stablecoins when asked. Every address
 * equals computeStablepayAddresses(roles) / computeTestStablecoinAddresses(), on every chain.
 */
export async function deployStablepay(
  signer: Signer,
  roles: StablepayRoles,
  options: { readonly testStablecoins?: boolean } = {},
): Promise<StablepayDeployment> {
  const init = stablepayInitCodes(roles);
  const expected = computeStablepayAddresses(roles);
  const results = [
    await deployDeterministic(signer, init.registry),
    await deployDeterministic(signer, init.paymentFactory),
    await deployDeterministic(signer, init.subscriptionManagerFactory),
    await deployDeterministic(signer, init.payoutDepositFactory),
  ];
  const [registry, paymentFactory, managerFactory, payoutFactory] = results.map((r) => r.address);
  if (
    registry !== expected.registry ||
    paymentFactory !== expected.paymentFactory ||
    managerFactory !== expected.subscriptionManagerFactory ||
    payoutFactory !== expected.payoutDepositFactory
  ) {
    throw new Error('deployStablepay: a deployed address differs from the computed one');
  }
  if (!options.testStablecoins) return { addresses: expected };
  const tokens: Partial<Record<TestStablecoinSymbol, string>> = {};
  for (const t of TEST_STABLECOINS) {
    tokens[t.symbol] = (await deployDeterministic(signer, testStablecoinInitCodeFor(t.symbol))).address;
  }
  return { addresses: expected, testStablecoins: tokens as Record<TestStablecoinSymbol, string> };
}
