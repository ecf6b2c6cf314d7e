import { getAddress, keccak256, toUtf8Bytes } from 'ethers';
import { payoutDepositAddress } from '@stablepay/contracts';
import { DomainError } from '@stablepay/util';
import type { PayoutChains } from '../payouts.config';

/**
 * Port: a customer's payout deposit address, one EVM address valid on every supported chain (SPEC: "one EVM
 * address valid on every supported EVM chain"). Everything else reads the address from the customer's creation fact,
 * so changing the derivation only changes customers created after it.
 */
export type CustomerDepositAddress = (merchantId: string, customerId: string) => string;
export const CUSTOMER_DEPOSIT_ADDRESS = Symbol('CUSTOMER_DEPOSIT_ADDRESS');

/**
 * Chain-less sandbox only (no PAYOUT_OFF_RAMP_ADDRESS / chains configured): a deterministic address from the ids that
 * no key and no contract controls. It lets the deposit test helper and the matching run without chains; crypto sent
 * to it on a real chain is lost (docs/payouts.md).
 */
export const sandboxDepositAddress: CustomerDepositAddress = (merchantId, customerId) =>
  getAddress(
    `0x${keccak256(toUtf8Bytes(`stablepay.payouts.customer-deposit:${merchantId}:${customerId}`)).slice(-40)}`,
  );

/**
 * The deployment's derivation: the CREATE2 address of the customer's PayoutDeposit clone (PayoutDepositFactory; the
 * salt binds merchant, customer and the off-ramp, so its funds can only be swept to the off-ramp) wherever the chain
 * layer configures payouts; the chain-less sandbox address without chains. A deployment with chains but no payouts
 * configuration (no PAYOUT_OFF_RAMP_ADDRESS) creates no customer (503 `payout_deposits_unavailable`): an address
 * nobody controls must never be shown where a chain could receive funds.
 */
export function customerDepositAddressFor(chains: PayoutChains | undefined): CustomerDepositAddress {
  if (!chains?.enabled) return sandboxDepositAddress;
  const payouts = chains.payouts;
  if (!payouts)
    return () => {
      throw new DomainError({
        type: 'api_error',
        status: 503,
        code: 'payout_deposits_unavailable',
        message: 'Payout deposit addresses are not configured on this deployment (PAYOUT_OFF_RAMP_ADDRESS).',
      });
    };
  return (merchantId, customerId) =>
    payoutDepositAddress({ factory: payouts.factory, offRamp: payouts.offRamp, merchantId, customerId });
}

/**
 * Whether `address` (from the customer's creation fact) is what the deployment derives for the customer now. A
 * deployment that derives none (chains without a payouts configuration) judges nothing here.
 */
export function isCurrentDepositAddress(
  derive: CustomerDepositAddress,
  merchantId: string,
  customerId: string,
  address: string,
): boolean {
  let current: string;
  try {
    current = derive(merchantId, customerId);
  } catch (error) {
    if (error instanceof DomainError) return true;
    throw error;
  }
  return getAddress(current) === getAddress(address);
}
