import { LIVE_CHAINS } from '@stablepay/evm';
import { computeTestStablecoinAddresses, type StablepayAddresses } from './deployment';

const STABLEPAY_CONTRACT_NAMES: Readonly<Record<keyof StablepayAddresses, string>> = {
  deterministicDeployer: 'the deterministic deployment proxy',
  registry: 'the Stablepay registry contract',
  paymentFactory: 'the Stablepay payment factory contract',
  depositImplementation: "the Stablepay payment deposits' implementation contract",
  subscriptionManagerFactory: 'the Stablepay subscription manager factory contract',
  payoutDepositFactory: 'the Stablepay payout deposit factory contract',
  payoutDepositImplementation: "the Stablepay payout deposits' implementation contract",
};

/**
 * Contracts that keep what they are sent and sign nothing: every stablecoin the service accepts (live and the local
 * test tokens) and the Stablepay contracts of `stablepay` (when the deployment knows them). An address taking funds
 * (a settlement address, a rescue destination) or signing (a merchant signer) that names one of them loses every
 * payment sent there, or can never sign: a pasted token address is the usual mistake. Lower-cased address -> what
 * it is, for the error message.
 */
export function knownContracts(
  stablepay: Partial<StablepayAddresses> | null = null,
): ReadonlyMap<string, string> {
  const known = new Map<string, string>();
  for (const chain of LIVE_CHAINS)
    for (const token of chain.stablecoins)
      known.set(token.address.toLowerCase(), `the ${token.symbol} token contract on eip155:${chain.chainId}`);
  for (const [symbol, address] of Object.entries(computeTestStablecoinAddresses()))
    known.set(address.toLowerCase(), `the test ${symbol} token contract of the local chains`);
  for (const [role, address] of Object.entries(stablepay ?? {}))
    if (typeof address === 'string')
      known.set(address.toLowerCase(), STABLEPAY_CONTRACT_NAMES[role as keyof StablepayAddresses]);
  return known;
}
