import { Wallet, id, type JsonRpcProvider } from 'ethers';
import {
  PaymentMethod,
  connectPaymentFactory,
  connectStablepayRegistry,
  connectTestStablecoin,
  toOnChainId,
} from '@stablepay/contracts';
import {
  ANVIL_DEV_PRIVATE_KEYS,
  localChainProvider,
  startLocalChains,
  type LocalChain,
} from '@stablepay/local-chains';
import { ChainRelayer } from '@stablepay/relayer';
import { DepositChain } from '../deposit-chain';

/**
 * One local chain with the Stablepay contracts, a registered merchant and a relayer holding the operator key: what
 * the payment action tests need to put a deposit in a given state on chain (paid, deployed DIRECT / TWO_STEP /
 * NONE) without the rest of the payment flow. Tests only. No evm_snapshot/evm_revert here: the relayer keeps its
 * own nonce, and anvil queues a transaction whose nonce lies ahead instead of refusing it.
 */
export interface DepositFixture {
  readonly chain: LocalChain;
  readonly provider: JsonRpcProvider;
  readonly relayer: ChainRelayer;
  readonly deposits: DepositChain;
  readonly operator: Wallet;
  readonly merchantSigner: Wallet;
  readonly merchantOnChainId: string;
  readonly settlement: string;
  readonly payer: Wallet;
  readonly stranger: Wallet;
  readonly usdc: string;
  readonly dai: string;
  /** Registers a merchant (signer + settlement) on the chain; the default one is registered already. */
  registerMerchant(merchantOnChainId: string, signer: string, settlement: string): Promise<void>;
  depositAddress(paymentOnChainId: string, merchantOnChainId?: string): Promise<string>;
  /** The payer mints and sends `amount` of `token` (default USDC) to `to`. */
  pay(to: string, amount: bigint, token?: string, from?: Wallet): Promise<string>;
  /** The operator deploys the deposit (DIRECT / TWO_STEP / NONE) attesting the payer; returns the tx hash. */
  deploy(
    paymentOnChainId: string,
    method: keyof typeof PaymentMethod,
    amount: bigint,
    options?: { token?: string; payer?: string; authorizationExpiry?: bigint; merchantOnChainId?: string },
  ): Promise<string>;
  flag(paymentOnChainId: string, merchantOnChainId?: string): Promise<void>;
  chainTime(): Promise<bigint>;
  increaseTime(seconds: bigint): Promise<void>;
  stop(): Promise<void>;
}

const key = (index: number): string => {
  const k = ANVIL_DEV_PRIVATE_KEYS[index];
  if (!k) throw new Error(`no anvil dev key ${index}`);
  return k;
};

export async function startDepositFixture(chainId = 8453): Promise<DepositFixture> {
  const chains = await startLocalChains({ chainIds: [chainId] });
  const chain = chains.chains[0];
  if (!chain) throw new Error('no local chain');
  const provider = localChainProvider(chain.rpcUrl, chain.chainId);
  const operator = new Wallet(chains.operator.privateKey, provider);
  const relayer = new ChainRelayer({
    chainId: chain.chainId,
    rpcUrl: chain.rpcUrl,
    privateKey: chains.operator.privateKey,
  });
  const deposits = new DepositChain(relayer, chain.addresses.registry);
  const merchantSigner = new Wallet(id('pay-actions test merchant signer'));
  const merchantOnChainId = toOnChainId('mer_pay_actions_fixture');
  const settlement = new Wallet(key(7)).address;
  const payer = new Wallet(key(5), provider);
  const stranger = new Wallet(key(6), provider);
  const registry = connectStablepayRegistry(chain.addresses.registry, operator);
  const factory = connectPaymentFactory(chain.addresses.paymentFactory, operator);
  const mined = async (tx: Promise<{ wait(): Promise<unknown> }>) => {
    await (await tx).wait();
  };
  // The operator wallet shares its key with the relayer; the relayer re-syncs its nonce after a "nonce too low".
  const operatorSend = mined;

  const fixture: DepositFixture = {
    chain,
    provider,
    relayer,
    deposits,
    operator,
    merchantSigner,
    merchantOnChainId,
    settlement,
    payer,
    stranger,
    usdc: chain.addresses.stablecoins.USDC,
    dai: chain.addresses.stablecoins.DAI,
    registerMerchant: (merchantId, signer, settlementAddress) =>
      operatorSend(registry.registerMerchant(merchantId, signer, settlementAddress)),
    depositAddress: (paymentId, merchantId = merchantOnChainId) =>
      factory.depositAddress(merchantId, paymentId),
    async pay(to, amount, token = chain.addresses.stablecoins.USDC, from = payer) {
      const coin = connectTestStablecoin(token, from);
      await mined(coin.mint(from.address, amount));
      // Fixed gas: an estimate taken before a concurrent sweep empties the address falls short (zero slot written).
      const tx = await coin.transfer(to, amount, { gasLimit: 100_000n });
      await tx.wait();
      return tx.hash;
    },
    async deploy(paymentId, method, amount, options = {}) {
      const expiry =
        options.authorizationExpiry ??
        (method === 'TWO_STEP' ? (await fixture.chainTime()) + 7n * 86_400n : 0n);
      const tx = await factory.deployDeposit(
        options.merchantOnChainId ?? merchantOnChainId,
        paymentId,
        PaymentMethod[method],
        options.token ?? chain.addresses.stablecoins.USDC,
        options.payer ?? payer.address,
        amount,
        expiry,
      );
      await tx.wait();
      return tx.hash;
    },
    flag: (paymentId, merchantId = merchantOnChainId) =>
      operatorSend(factory.flagPayment(merchantId, paymentId)),
    async chainTime() {
      const block = await provider.getBlock('latest');
      if (!block) throw new Error('no latest block');
      return BigInt(block.timestamp);
    },
    async increaseTime(seconds) {
      await provider.send('evm_increaseTime', [Number(seconds)]);
      await provider.send('evm_mine', []);
    },
    async stop() {
      relayer.destroy();
      provider.destroy();
      await chains.stop();
    },
  };
  await fixture.registerMerchant(merchantOnChainId, merchantSigner.address, settlement);
  return fixture;
}
