import { getAddress } from 'ethers';
import { validationError } from '@stablepay/util';

/** Checksummed or all-lowercase 20-byte hex; a mixed-case address with a wrong checksum is refused. */
export function parseAddress(param: string, value: string, invalid = validationError): string {
  if (!/^0x[0-9a-fA-F]{40}$/.test(value))
    throw invalid(param, `${param} must be a 20-byte hex address (0x followed by 40 hex digits).`);
  const hex = value.slice(2);
  const lower = hex === hex.toLowerCase();
  const upper = hex === hex.toUpperCase();
  const checksummed = getAddress(value.toLowerCase());
  if (!lower && !upper && checksummed !== value)
    throw invalid(param, `${param} has an invalid EIP-55 checksum.`);
  return checksummed;
}
