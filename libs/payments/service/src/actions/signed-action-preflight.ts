import { ZeroAddress, getAddress } from 'ethers';
import {
  MAX_SIGNATURE_HORIZON_SECONDS,
  hashTypedData,
  parseAddress,
  parseCaip19,
  parseCaip2,
  stablepayDomain,
  verifyTypedDataSigner,
  type Eip712Domain,
  type MessageByKind,
} from '@stablepay/evm';
import { knownContracts, type StablepayAddresses } from '@stablepay/contracts';
import { cannotProcess, conflict, MAX_UINT256, tooLargeFault, validationError } from '@stablepay/util';

/**
 * API preflight of the merchant-signed payment actions (POST /payments/:paymentId/capture, /refund, /rescue): the
 * checks the PaymentDeposit contract runs on the signature, run before anything is sent, with the same EIP-712
 * definitions (@stablepay/evm, which the contracts' typehashes are tested against). Pure: the caller reads the
 * chain (merchant signer and epoch from the registry, latest block time, whether the digest was burned) and passes
 * the values in.
 *
 * Request bodies (docs/openapi.yaml): `amount` (token smallest unit, canonical integer string), `deadline` (unix
 * seconds, the one signed), `signature` (65-byte 0x-hex from signCapture / signRefund / signRescue), optional
 * `token` (capture/refund: must be the payment's token; rescue: required, another token on the payment's chain or
 * `native`), rescue `to`, optional refund `payer` (must be the attested payer) and optional `epoch` (when sent, must
 * be the merchant's current epoch: a clearer error than invalid_signature after a revocation).
 *
 * Errors (status, type, code, param):
 *
 * | code                        | status | type             | param     | when                                                  |
 * |-----------------------------|--------|------------------|-----------|-------------------------------------------------------|
 * | invalid_amount              | 400    | validation_error | amount    | not a canonical positive integer string               |
 * | invalid_deadline            | 400    | validation_error | deadline  | not unix seconds (integer)                            |
 * | invalid_signature           | 400    | validation_error | signature | not 65 bytes of 0x-hex, v not 27/28, high s           |
 * | invalid_epoch               | 400    | validation_error | epoch     | not an integer                                        |
 * | invalid_address, invalid_caip19 | 400 | validation_error | to/token/payer | malformed                                     |
 * | token_mismatch              | 422    | cannot_process   | token     | capture/refund of another token than the payment's    |
 * | chain_mismatch              | 422    | cannot_process   | token     | a CAIP-19 token of another chain than the deposit's   |
 * | payer_owned_token           | 422    | cannot_process   | token     | rescue of the payment token (the payer's: recover)    |
 * | invalid_destination         | 422    | cannot_process   | to        | rescue to the zero address, the deposit itself or a   |
 * |                             |        |                  |           | token contract (the rescued one, a known stablecoin)  |
 * |                             |        |                  |           | or a Stablepay contract (registry, factories, ...)    |
 * | payer_mismatch              | 422    | cannot_process   | payer     | refund naming another payer than the attested one     |
 * | epoch_mismatch              | 422    | cannot_process   | epoch     | the sent epoch is not the registry's current one      |
 * | signature_expired           | 422    | cannot_process   | deadline  | deadline before the chain time (SignatureExpired)     |
 * | signature_deadline_too_far  | 422    | cannot_process   | deadline  | more than 7 days after the chain time (DeadlineTooFar)|
 * | merchant_not_registered     | 422    | cannot_process   |           | no signer registered on the deposit's chain           |
 * | invalid_signature           | 422    | cannot_process   | signature | recovers to another key than the registered signer    |
 * | signature_already_used      | 409    | invalid_request  | signature | the digest was burned on chain (SignatureAlreadyUsed) |
 */
export type SignedActionKind = 'capture' | 'refund' | 'rescue';

type PrimaryType = 'Capture' | 'Refund' | 'Rescue' | 'DisputePayer';

/** The JSON body as received (types are checked here, not trusted). */
export interface SignedActionBody {
  readonly amount?: unknown;
  readonly deadline?: unknown;
  readonly signature?: unknown;
  readonly token?: unknown;
  readonly to?: unknown;
  readonly payer?: unknown;
  readonly epoch?: unknown;
}

/** What preflight needs of the payment (from its stream): where the deposit is and what it holds. */
export interface PaymentSigningFacts {
  /** `on_chain_id`: the bytes32 the deposit records. */
  readonly onChainId: string;
  readonly depositAddress: string;
  /** CAIP-2 of the chain the deposit was deployed on. */
  readonly chain: string;
  /** CAIP-19 of the payment token (`detected_asset`). */
  readonly asset: string;
  /** The payer attested at deployment (refunds go only there). */
  readonly payer: string | null;
}

/** Read from the chain just before preflight. */
export interface SigningChainFacts {
  /** The merchant's registered signer on this chain (zero address when not registered). */
  readonly signer: string;
  readonly epoch: bigint;
  /** Latest block timestamp (unix seconds). */
  readonly chainTime: bigint;
}

export interface SignedAction<K extends PrimaryType = PrimaryType> {
  readonly kind: SignedActionKind | 'dispute_payer';
  readonly primaryType: K;
  readonly domain: Eip712Domain;
  readonly message: MessageByKind[K];
  /** The EIP-712 digest the contract burns on use. */
  readonly digest: string;
  readonly signature: string;
  readonly amount: bigint;
  readonly deadline: bigint;
  /** Token address (checksummed); the zero address for the native coin (rescue). */
  readonly token: string;
  /** CAIP-19 of the token, or `native`. */
  readonly asset: string;
  /** Refund: the attested payer; rescue: the signed destination; capture: null (the settlement bound at deploy). */
  readonly to: string | null;
}

const DECIMAL = /^[1-9][0-9]{0,77}$/;
const SIGNATURE_HEX = /^0x[0-9a-fA-F]{130}$/;
export const NATIVE_ASSET = 'native';

/** `amount` of a payment action: the token's smallest unit as a canonical positive integer string. */
export function parseActionAmount(value: unknown): bigint {
  if (typeof value !== 'string' || !DECIMAL.test(value) || BigInt(value) > MAX_UINT256) {
    throw validationError(
      'amount',
      tooLargeFault('amount', value) ??
        "amount must be a positive integer string in the token's smallest unit (no decimal point, no leading zeros).",
      'invalid_amount',
    );
  }
  return BigInt(value);
}

function parseUint(value: unknown, param: string, code: string): bigint {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return BigInt(value);
  if (typeof value === 'string' && /^(0|[1-9][0-9]{0,77})$/.test(value) && BigInt(value) <= MAX_UINT256) {
    return BigInt(value);
  }
  throw validationError(
    param,
    tooLargeFault(param, value) ?? `${param} must be a non-negative integer (number or decimal string).`,
    code,
  );
}

function parseSignature(value: unknown): string {
  if (typeof value !== 'string' || !SIGNATURE_HEX.test(value)) {
    throw validationError(
      'signature',
      'signature must be the 65-byte 0x-hex EIP-712 signature the SDK signer returned.',
      'invalid_signature',
    );
  }
  return value;
}

const sameAddress = (a: string, b: string): boolean => a.toLowerCase() === b.toLowerCase();

// Computed once per deployment: the test tokens' and Stablepay contracts' addresses are derived (CREATE2).
const knownByDeployment = new WeakMap<StablepayAddresses, ReadonlyMap<string, string>>();
let knownWithoutDeployment: ReadonlyMap<string, string> | undefined;
/** Every contract that keeps what it is sent: the known stablecoins and, when known, the Stablepay contracts. */
export function contractsKeepingFunds(stablepay: StablepayAddresses | null): ReadonlyMap<string, string> {
  if (stablepay === null) return (knownWithoutDeployment ??= knownContracts());
  let known = knownByDeployment.get(stablepay);
  if (!known) {
    known = knownContracts(stablepay);
    knownByDeployment.set(stablepay, known);
  }
  return known;
}

/** A token as the API takes it: a CAIP-19 id on the deposit's chain, or a bare address (or `native` for rescue). */
function parseToken(value: unknown, chainId: bigint, allowNative: boolean): { token: string; asset: string } {
  if (
    allowNative &&
    (value === NATIVE_ASSET || (typeof value === 'string' && sameAddress(value, ZeroAddress)))
  ) {
    return { token: ZeroAddress, asset: NATIVE_ASSET };
  }
  if (typeof value === 'string' && value.includes(':')) {
    const asset = parseCaip19(value, 'token');
    if (asset.chain.chainId !== chainId) {
      throw cannotProcess(
        'chain_mismatch',
        `The token ${asset.caip19} is not on the deposit's chain eip155:${chainId}.`,
        'token',
      );
    }
    return { token: asset.address, asset: asset.caip19 };
  }
  const token = parseAddress(value, 'token');
  return { token, asset: `eip155:${chainId}/erc20:${token}` };
}

/** The body's optional `epoch`: when sent, the merchant's current one (a clearer error than invalid_signature). */
function checkEpoch(body: SignedActionBody, epoch: bigint): void {
  if (body.epoch === undefined || body.epoch === null) return;
  const sent = parseUint(body.epoch, 'epoch', 'invalid_epoch');
  if (sent !== epoch) {
    throw cannotProcess(
      'epoch_mismatch',
      `The signature names epoch ${sent}; the merchant's current epoch is ${epoch} (authorizations were revoked): sign again.`,
      'epoch',
    );
  }
}

/**
 * Checks the body's shape and its agreement with the payment, and builds the exact typed data the contract will
 * hash (the merchant's current `epoch` is bound in, as the contract does). `stablepay`: the deployment's contracts
 * (null where none is configured), which a rescue may not name as its destination. Throws DomainError.
 */
export function buildSignedAction(
  kind: SignedActionKind,
  body: SignedActionBody,
  payment: PaymentSigningFacts,
  epoch: bigint,
  stablepay: StablepayAddresses | null,
): SignedAction {
  const amount = parseActionAmount(body.amount);
  const deadline = parseUint(body.deadline, 'deadline', 'invalid_deadline');
  const signature = parseSignature(body.signature);
  checkEpoch(body, epoch);
  const chainId = parseCaip2(payment.chain, 'chain').chainId;
  const paymentToken = parseCaip19(payment.asset, 'asset');
  const domain = stablepayDomain(chainId, getAddress(payment.depositAddress));
  const paymentId = payment.onChainId.toLowerCase();

  if (kind === 'rescue') {
    if (body.token === undefined || body.token === null) {
      throw validationError('token', 'token is required: the token to rescue (CAIP-19, address or native).');
    }
    const { token, asset } = parseToken(body.token, chainId, true);
    if (sameAddress(token, paymentToken.address)) {
      throw cannotProcess(
        'payer_owned_token',
        'Funds in the payment token belong to the payer and cannot be rescued: use POST /payments/:paymentId/recover.',
        'token',
      );
    }
    const to = parseAddress(body.to, 'to');
    if (sameAddress(to, ZeroAddress) || sameAddress(to, payment.depositAddress)) {
      throw cannotProcess('invalid_destination', `Funds cannot be rescued to ${to}.`, 'to');
    }
    // A token contract keeps what it is sent: the merchant's signature would burn the rescued funds.
    const contract = sameAddress(to, token)
      ? `the ${asset} token contract itself`
      : contractsKeepingFunds(stablepay).get(to.toLowerCase());
    if (contract !== undefined) {
      throw cannotProcess(
        'invalid_destination',
        `Funds cannot be rescued to ${to}: it is ${contract}, which keeps what it is sent.`,
        'to',
      );
    }
    const message: MessageByKind['Rescue'] = { paymentId, token, to, amount, epoch, deadline };
    return {
      kind,
      primaryType: 'Rescue',
      domain,
      message,
      digest: hashTypedData('Rescue', domain, message),
      signature,
      amount,
      deadline,
      token,
      asset,
      to,
    };
  }

  if (body.token !== undefined && body.token !== null) {
    const { token } = parseToken(body.token, chainId, false);
    if (!sameAddress(token, paymentToken.address)) {
      throw cannotProcess(
        'token_mismatch',
        `Only the payment token ${paymentToken.caip19} can be ${kind === 'capture' ? 'captured' : 'refunded'}.`,
        'token',
      );
    }
  }
  const token = paymentToken.address;
  if (kind === 'capture') {
    const message: MessageByKind['Capture'] = { paymentId, token, amount, epoch, deadline };
    return {
      kind,
      primaryType: 'Capture',
      domain,
      message,
      digest: hashTypedData('Capture', domain, message),
      signature,
      amount,
      deadline,
      token,
      asset: paymentToken.caip19,
      to: null,
    };
  }
  if (!payment.payer) {
    throw cannotProcess('payer_unknown', 'No payer is attested for this payment; it cannot be refunded now.');
  }
  const payer = getAddress(payment.payer);
  if (body.payer !== undefined && body.payer !== null) {
    const sent = parseAddress(body.payer, 'payer');
    if (!sameAddress(sent, payer)) {
      throw cannotProcess(
        'payer_mismatch',
        `A refund goes only to the attested payer ${payer}; the request names ${sent}.`,
        'payer',
      );
    }
  }
  const message: MessageByKind['Refund'] = { paymentId, token, payer, amount, epoch, deadline };
  return {
    kind,
    primaryType: 'Refund',
    domain,
    message,
    digest: hashTypedData('Refund', domain, message),
    signature,
    amount,
    deadline,
    token,
    asset: paymentToken.caip19,
    to: payer,
  };
}

/**
 * POST /payments/:paymentId/dispute_payer: the merchant's `DisputePayer(paymentId, payer, epoch, deadline)` over the
 * payer the deposit attests now (read from the chain). Body: `deadline`, `signature`, optional `payer` (when sent,
 * must be the attested payer: 422 `payer_mismatch`) and `epoch` (as for the other signed actions). A payment with no
 * payer attested (disputed already) is 409 `payer_disputed`. The digest, deadline and signer are checked by
 * `verifySignedAction` like every signed action.
 */
export function buildDisputePayer(
  body: SignedActionBody,
  payment: PaymentSigningFacts,
  epoch: bigint,
): SignedAction<'DisputePayer'> {
  const deadline = parseUint(body.deadline, 'deadline', 'invalid_deadline');
  const signature = parseSignature(body.signature);
  checkEpoch(body, epoch);
  if (!payment.payer || sameAddress(payment.payer, ZeroAddress)) {
    throw conflict(
      'payer_disputed',
      'The payer was disputed already; no payer is attested until the operator attests the right one.',
    );
  }
  const payer = getAddress(payment.payer);
  if (body.payer !== undefined && body.payer !== null) {
    const sent = parseAddress(body.payer, 'payer');
    if (!sameAddress(sent, payer)) {
      throw cannotProcess(
        'payer_mismatch',
        `Only the attested payer ${payer} can be disputed; the request names ${sent}.`,
        'payer',
      );
    }
  }
  const chainId = parseCaip2(payment.chain, 'chain').chainId;
  const paymentToken = parseCaip19(payment.asset, 'asset');
  const domain = stablepayDomain(chainId, getAddress(payment.depositAddress));
  const message: MessageByKind['DisputePayer'] = {
    paymentId: payment.onChainId.toLowerCase(),
    payer,
    epoch,
    deadline,
  };
  return {
    kind: 'dispute_payer',
    primaryType: 'DisputePayer',
    domain,
    message,
    digest: hashTypedData('DisputePayer', domain, message),
    signature,
    amount: 0n,
    deadline,
    token: paymentToken.address,
    asset: paymentToken.caip19,
    to: payer,
  };
}

/**
 * The contract's own signature checks, in its order (deadline, then the digest not used, then the signer), so
 * preflight answers what the chain would: nothing is submitted unless this passes.
 */
export function verifySignedAction(
  action: SignedAction,
  chain: SigningChainFacts,
  digestUsed: boolean,
): void {
  if (action.deadline < chain.chainTime) {
    throw cannotProcess(
      'signature_expired',
      `The signature's deadline ${action.deadline} is before the chain time ${chain.chainTime}: sign again.`,
      'deadline',
    );
  }
  if (action.deadline > chain.chainTime + MAX_SIGNATURE_HORIZON_SECONDS) {
    throw cannotProcess(
      'signature_deadline_too_far',
      `The deadline may lie at most 7 days (${MAX_SIGNATURE_HORIZON_SECONDS} s) after the chain time ${chain.chainTime}.`,
      'deadline',
    );
  }
  if (digestUsed) {
    throw conflict(
      'signature_already_used',
      'This signature was already used on chain (each merchant signature is single-use): sign a new request.',
      'signature',
    );
  }
  if (sameAddress(chain.signer, ZeroAddress)) {
    throw cannotProcess(
      'merchant_not_registered',
      `The merchant has no signer registered on eip155:${action.domain.chainId}.`,
    );
  }
  const recovered = verifyTypedDataSigner(
    action.primaryType as 'Capture',
    action.domain,
    action.message as MessageByKind['Capture'],
    action.signature,
  );
  if (!sameAddress(recovered, chain.signer)) {
    throw cannotProcess(
      'invalid_signature',
      `The signature is not the merchant signer's over this ${action.primaryType} (chain eip155:${action.domain.chainId}, deposit ${action.domain.verifyingContract}, epoch ${action.message.epoch}, ${action.primaryType === 'DisputePayer' ? 'the attested payer' : 'the amount, token'} and deadline sent).`,
      'signature',
    );
  }
}
