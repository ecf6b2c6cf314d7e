import { getAddress } from 'ethers';
import { DomainError, validationError } from '@stablepay/util';

/**
 * CAIP-2 chain ids and CAIP-19 asset ids, EVM only (v1 supports the `eip155:` namespace alone).
 *
 * Normalisation: the canonical form of a CAIP-19 id carries the EIP-55 checksummed address
 * (`eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913`). Inputs may use any case; an all-lower or
 * all-upper address is accepted as is, a mixed-case one must carry a valid checksum (a typo in a mixed-case
 * address is then caught instead of silently pointing at another contract). Stored and emitted ids are always
 * the canonical form, so string equality on CAIP ids is meaningful everywhere (read models, unique keys).
 *
 * Every parse error is a DomainError (validation_error, 400) that names the offending request parameter.
 */
export const EIP155_NAMESPACE = 'eip155';
export const ERC20_ASSET_NAMESPACE = 'erc20';

export type CaipErrorCode =
  | 'invalid_caip2'
  | 'unsupported_chain_namespace'
  | 'invalid_caip19'
  | 'unsupported_asset_namespace'
  | 'invalid_address';

export interface Caip2ChainId {
  readonly namespace: typeof EIP155_NAMESPACE;
  /** The EVM chain id (EIP-155). */
  readonly chainId: bigint;
  /** Canonical string form, e.g. `eip155:8453`. */
  readonly caip2: string;
}

export interface Caip19AssetId {
  readonly chain: Caip2ChainId;
  readonly assetNamespace: typeof ERC20_ASSET_NAMESPACE;
  /** EIP-55 checksummed token contract address. */
  readonly address: string;
  /** Canonical string form, e.g. `eip155:8453/erc20:0x8335...2913`. */
  readonly caip19: string;
}

// CAIP-2: namespace [-a-z0-9]{3,8}, reference [-_a-zA-Z0-9]{1,32}.
const CAIP2_SHAPE = /^([-a-z0-9]{3,8}):([-_a-zA-Z0-9]{1,32})$/;
// CAIP-19 adds `/asset_namespace:asset_reference` (reference [-.%a-zA-Z0-9]{1,128}).
const CAIP19_SHAPE = /^([^/]+)\/([-a-z0-9]{3,8}):([-.%a-zA-Z0-9]{1,128})$/;
// EIP-155 ids are positive decimal integers written without leading zeros (one spelling per chain).
const EIP155_REFERENCE = /^[1-9][0-9]*$/;
const HEX_ADDRESS = /^0x[0-9a-fA-F]{40}$/;

function describe(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : `a value of type ${typeof value}`;
}

/** Parses `eip155:<chain id>`. Throws validation_error (invalid_caip2 / unsupported_chain_namespace) on `param`. */
export function parseCaip2(value: unknown, param = 'chain'): Caip2ChainId {
  const shape = typeof value === 'string' ? CAIP2_SHAPE.exec(value) : null;
  if (shape === null) {
    throw validationError(
      param,
      `${describe(value)} is not a CAIP-2 chain id (expected eip155:<chain id>)`,
      'invalid_caip2',
    );
  }
  const [, namespace = '', reference = ''] = shape;
  if (namespace !== EIP155_NAMESPACE) {
    throw validationError(
      param,
      `Chain namespace '${namespace}' is not supported; only eip155 (EVM) chains are`,
      'unsupported_chain_namespace',
    );
  }
  if (!EIP155_REFERENCE.test(reference)) {
    throw validationError(
      param,
      `${describe(value)} is not a valid eip155 chain id: the reference must be a positive decimal integer without leading zeros`,
      'invalid_caip2',
    );
  }
  const chainId = BigInt(reference);
  return { namespace: EIP155_NAMESPACE, chainId, caip2: `${EIP155_NAMESPACE}:${chainId}` };
}

/** `eip155:<chainId>` for a positive integer chain id. */
export function formatCaip2(chainId: bigint | number): string {
  return `${EIP155_NAMESPACE}:${positiveChainId(chainId)}`;
}

/** Parses and re-formats, e.g. to store a client-supplied chain in canonical form. */
export function normalizeCaip2(value: unknown, param = 'chain'): string {
  return parseCaip2(value, param).caip2;
}

export interface AddressRules {
  /**
   * Refuse the zero address: where the address receives funds (a destination, a settlement address) or must sign (a
   * signer, a payer), it has no key and burns what it is sent.
   */
  readonly nonZero?: boolean;
  /** The error raised (default: 400 validation_error), for a route whose SPEC names another type. */
  readonly invalid?: (param: string, message: string, code: 'invalid_address') => DomainError;
}

const ZERO_ADDRESS = /^0x0{40}$/;

/**
 * An EVM address in EIP-55 checksum form: the one address parser of every request, query and configuration value.
 * Accepts `0x` + 40 hex digits all lower case, all upper case or correctly checksummed (so a lower-cased stored
 * address and a checksummed filter compare equal once parsed); refuses a mixed-case address whose checksum is wrong
 * (a typo would otherwise point at another account), code `invalid_address` on `param`.
 */
export function parseAddress(value: unknown, param = 'address', rules: AddressRules = {}): string {
  const invalid = rules.invalid ?? validationError;
  if (typeof value !== 'string' || !HEX_ADDRESS.test(value)) {
    throw invalid(
      param,
      value === undefined || value === null
        ? `${param} is required: an EVM address (0x followed by 40 hex digits).`
        : `${param} must be an EVM address (0x followed by 40 hex digits); received ${describe(value)}.`,
      'invalid_address',
    );
  }
  let address: string;
  try {
    address = getAddress(value);
  } catch {
    throw invalid(
      param,
      `${param} has an invalid EIP-55 checksum (${describe(value)}): send it all lower case or correctly checksummed.`,
      'invalid_address',
    );
  }
  if (rules.nonZero && ZERO_ADDRESS.test(address))
    throw invalid(
      param,
      `${param} must not be the zero address (no key signs for it; what it is sent is lost).`,
      'invalid_address',
    );
  return address;
}

/** Parses `eip155:<chain id>/erc20:<address>`; the address comes back checksummed. */
export function parseCaip19(value: unknown, param = 'asset'): Caip19AssetId {
  const shape = typeof value === 'string' ? CAIP19_SHAPE.exec(value) : null;
  if (shape === null) {
    throw validationError(
      param,
      `${describe(value)} is not a CAIP-19 asset id (expected eip155:<chain id>/erc20:<token address>)`,
      'invalid_caip19',
    );
  }
  const [, chainPart = '', assetNamespace = '', reference = ''] = shape;
  const chain = parseAssetChain(chainPart, value, param);
  if (assetNamespace !== ERC20_ASSET_NAMESPACE) {
    throw validationError(
      param,
      `Asset namespace '${assetNamespace}' is not supported; only erc20 tokens are`,
      'unsupported_asset_namespace',
    );
  }
  const address = parseAddress(reference, param);
  return {
    chain,
    assetNamespace: ERC20_ASSET_NAMESPACE,
    address,
    caip19: `${chain.caip2}/${ERC20_ASSET_NAMESPACE}:${address}`,
  };
}

/** Canonical CAIP-19 id of an ERC-20 token. Throws a plain error on a malformed address (a programming error here). */
export function formatCaip19(chainId: bigint | number, tokenAddress: string): string {
  return `${formatCaip2(chainId)}/${ERC20_ASSET_NAMESPACE}:${getAddress(tokenAddress)}`;
}

export function normalizeCaip19(value: unknown, param = 'asset'): string {
  return parseCaip19(value, param).caip19;
}

// A malformed chain part makes the whole asset id malformed; an unsupported namespace keeps its own code.
function parseAssetChain(chainPart: string, value: unknown, param: string): Caip2ChainId {
  try {
    return parseCaip2(chainPart, param);
  } catch (error) {
    if (error instanceof DomainError && error.code === 'invalid_caip2') {
      throw validationError(
        param,
        `${describe(value)} is not a CAIP-19 asset id: ${error.message}`,
        'invalid_caip19',
      );
    }
    throw error;
  }
}

function positiveChainId(chainId: bigint | number): bigint {
  if (typeof chainId === 'number' && !Number.isSafeInteger(chainId)) {
    throw new RangeError(`chain id must be an integer, got ${chainId}`);
  }
  const id = BigInt(chainId);
  if (id <= 0n) throw new RangeError(`chain id must be positive, got ${id}`);
  return id;
}
