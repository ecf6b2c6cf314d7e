import { getAddress, keccak256, toUtf8Bytes } from 'ethers';

/**
 * Port: a customer's payout deposit address, one EVM address valid on every supported chain (SPEC: "one EVM
 * address valid on every supported EVM chain"). Everything else reads the address from the customer's creation fact,
 * so swapping the derivation only changes customers created after the swap.
 */
export type CustomerDepositAddress = (customerId: string) => string;
export const CUSTOMER_DEPOSIT_ADDRESS = Symbol('CUSTOMER_DEPOSIT_ADDRESS');

/**
 * PLACEHOLDER until the CREATE2 per-customer payout deposit contract lands (worktree `payouts-chain`): a
 * deterministic address from the customer id, which no key and no contract controls. Good for the sandbox (the
 * test helper and the deposit matching), never for real funds: docs/payouts.md, "Not built yet".
 */
export const customerDepositAddress: CustomerDepositAddress = (customerId) =>
  getAddress(`0x${keccak256(toUtf8Bytes(`stablepay.payouts.customer-deposit:${customerId}`)).slice(-40)}`);
