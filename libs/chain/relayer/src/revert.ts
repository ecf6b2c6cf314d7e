import { isError, type Interface } from 'ethers';

/**
 * A revert, decoded with the target contract's ABI. `errorName` is what the charge ledger stores as
 * `failure_reason` (e.g. `ChargeAmountExceedsCap`):
 * - the custom error's name when its selector is in the ABI;
 * - `Error` for `require(..., "reason")` / `revert("reason")` (args[0] is the reason string);
 * - `Panic` for a Solidity panic (args[0] is the panic code);
 * - `UnknownRevert` when there is no revert data or its selector is not in the ABI.
 */
export interface RevertReason {
  readonly errorName: string;
  /** Decoded arguments in declaration order (bigint for integers, checksummed strings for addresses). */
  readonly args: readonly unknown[];
  /** 4-byte selector as 0x-hex, or null when the revert carried no data. */
  readonly selector: string | null;
  /** Raw revert data (0x when empty). */
  readonly data: string;
}

export const UNKNOWN_REVERT = 'UnknownRevert';

export function decodeRevert(iface: Interface, data: string): RevertReason {
  const selector = data.length >= 10 ? data.slice(0, 10).toLowerCase() : null;
  if (selector !== null) {
    try {
      const described = iface.parseError(data);
      if (described !== null) {
        return { errorName: described.name, args: described.args.toArray(true), selector, data };
      }
    } catch {
      // The selector matched but the payload does not decode: report it as unknown rather than guess.
    }
  }
  return { errorName: UNKNOWN_REVERT, args: [], selector, data };
}

/**
 * The revert data of a failed eth_call / eth_estimateGas, or null when the error is not a revert (network failure,
 * insufficient funds for gas, ...) and so must not be reported as a contract rejection.
 */
export function revertDataOf(error: unknown): string | null {
  if (!isError(error, 'CALL_EXCEPTION')) return null;
  if (typeof error.data === 'string') return error.data;
  // Some nodes answer estimateGas reverts without data at the top level; look one level down before giving up.
  const nested = (error.info as { error?: { data?: unknown } } | undefined)?.error?.data;
  return typeof nested === 'string' && nested.startsWith('0x') ? nested : '0x';
}
