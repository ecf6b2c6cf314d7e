import { ErrorFragment, Interface } from 'ethers';
import { PaymentDepositAbi } from './generated/PaymentDeposit';
import { PaymentFactoryAbi } from './generated/PaymentFactory';
import { PayoutDepositAbi } from './generated/PayoutDeposit';
import { PayoutDepositFactoryAbi } from './generated/PayoutDepositFactory';
import { StablepayRegistryAbi } from './generated/StablepayRegistry';
import { SubscriptionManagerAbi } from './generated/SubscriptionManager';
import { SubscriptionManagerFactoryAbi } from './generated/SubscriptionManagerFactory';
import { TestStablecoinAbi } from './generated/TestStablecoin';

/** Every custom error any Stablepay contract (or the test stablecoin) can raise, deduplicated by selector. */
export const STABLEPAY_ERRORS_INTERFACE: Interface = (() => {
  const seen = new Map<string, ErrorFragment>();
  for (const abi of [
    SubscriptionManagerAbi,
    PaymentDepositAbi,
    PaymentFactoryAbi,
    PayoutDepositAbi,
    PayoutDepositFactoryAbi,
    SubscriptionManagerFactoryAbi,
    StablepayRegistryAbi,
    TestStablecoinAbi,
  ]) {
    for (const item of abi) {
      if (item.type !== 'error') continue;
      const fragment = ErrorFragment.from(item);
      if (!seen.has(fragment.selector)) seen.set(fragment.selector, fragment);
    }
  }
  return new Interface([...seen.values()]);
})();

export interface DecodedContractError {
  /** The error name: a custom error (e.g. BudgetExceeded), or Error / Panic for the built-ins. */
  readonly name: string;
  readonly signature: string;
  readonly selector: string;
  /** Decoded arguments by name (positional names argN when unnamed). */
  readonly args: Readonly<Record<string, unknown>>;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null;
}

/**
 * The revert data carried by an ethers error (estimateGas, staticCall, call) or a JSON-RPC error body, looking
 * through the shapes ethers v6 and anvil produce. undefined when there is none.
 */
export function revertDataOf(error: unknown, depth = 0): string | undefined {
  if (depth > 5 || !isRecord(error)) return undefined;
  const data = error['data'];
  if (typeof data === 'string' && /^0x[0-9a-fA-F]*$/.test(data) && data.length >= 10) return data;
  if (isRecord(data)) {
    const nested = revertDataOf(data, depth + 1);
    if (nested) return nested;
  }
  for (const key of ['error', 'info', 'revert', 'cause']) {
    const nested = revertDataOf(error[key], depth + 1);
    if (nested) return nested;
  }
  return undefined;
}

/** Decodes revert data (or an ethers error holding it) against every Stablepay error. */
export function decodeStablepayError(errorOrData: unknown): DecodedContractError | undefined {
  const data = typeof errorOrData === 'string' ? errorOrData : revertDataOf(errorOrData);
  if (!data) return undefined;
  const parsed = STABLEPAY_ERRORS_INTERFACE.parseError(data);
  if (!parsed) return undefined;
  const args: Record<string, unknown> = {};
  parsed.fragment.inputs.forEach((input, i) => {
    args[input.name || `arg${i}`] = parsed.args[i];
  });
  return { name: parsed.name, signature: parsed.signature, selector: parsed.selector, args };
}
