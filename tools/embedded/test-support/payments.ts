import type { TransactionReceipt, Wallet } from 'ethers';
import { connectStablepayRegistry, connectTestStablecoin, toOnChainId } from '@stablepay/contracts';
import type { AnvilChain } from './anvil';
import { type Api, type Json, until } from './http';

/**
 * Gas for a customer's token transfer, fixed rather than estimated: the estimate is taken while the deposit address
 * still holds an earlier part, and the service's deploy can sweep it to zero before the transfer is mined, so the
 * transfer then writes a zero balance slot (20,000 gas more than estimated) and runs out of gas (status 0, all its
 * gas used): a flaky "revert" of a second part. A wallet adds such a margin too.
 */
export const TRANSFER_GAS = 100_000n;

/** The customer's transfer of a test stablecoin (minted first) from `payer` to `to`; answers the transaction hash. */
export async function transferToken(
  chain: AnvilChain,
  payer: Wallet,
  symbol: 'USDC' | 'USDT' | 'DAI',
  to: string,
  amount: bigint,
): Promise<string> {
  const coin = connectTestStablecoin(
    chain.local.addresses.stablecoins[symbol],
    payer.connect(chain.provider()),
  );
  await (await coin.mint(payer.address, amount)).wait();
  const receipt = (await (
    await coin.transfer(to, amount, { gasLimit: TRANSFER_GAS })
  ).wait()) as TransactionReceipt;
  return receipt.hash;
}

/** A checkout created through the API; answers the payment object. */
export async function newPayment(api: Api, body: Json, key?: string): Promise<Json> {
  const created = await api('POST', '/checkouts', { currency: 'USD', ...body }, key);
  if (created.status !== 201) throw new Error(`checkout refused: ${JSON.stringify(created.body)}`);
  return (await api('GET', `/payments/${String(created.body['payment_id'])}`, undefined, key)).body;
}

/** Polls the payment object until `done` holds. */
export function paymentUntil(
  api: Api,
  paymentId: string,
  done: (p: Json) => boolean,
  what: string,
  key?: string,
): Promise<Json> {
  return until(async () => (await api('GET', `/payments/${paymentId}`, undefined, key)).body, done, what);
}

/** What the merchant's EIP-712 payment signatures (signCapture, signRefund, signRecover...) are made over. */
export async function paymentSigning(chain: AnvilChain, merchantId: string, p: Json) {
  const registry = connectStablepayRegistry(chain.local.addresses.registry, chain.provider());
  return {
    domain: { chain: String(p['detected_chain']), verifyingContract: String(p['deposit_address']) },
    paymentId: String(p['on_chain_id']),
    token: String(p['detected_asset']),
    epoch: await registry.merchantEpoch(toOnChainId(merchantId)),
    deadline: (await chain.now()) + 3_600n,
  };
}

/** Waits until the chain's registry holds `signer` for the merchant (its registration by the service landed). */
export async function merchantRegistered(
  chain: AnvilChain,
  merchantId: string,
  signer: string,
): Promise<void> {
  await until(
    () =>
      connectStablepayRegistry(chain.local.addresses.registry, chain.provider()).merchantAuth(
        toOnChainId(merchantId),
      ),
    (auth) => auth.signer === signer,
    'the merchant registered on chain',
  );
}
