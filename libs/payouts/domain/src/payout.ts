import {
  bodyNotAnObject,
  cannotProcess,
  conflict,
  fieldFault,
  MAX_UINT256,
  notFound,
  parseMetadata,
  takesFields,
  tooLargeFault,
  unknownParameter,
  validationError,
} from '@stablepay/util';
import { parseAddress } from '@stablepay/evm';
import type { CustomerStatus } from './customer';

/**
 * The Payout aggregate (beta), stream `payout-<po_ id>`: a customer's crypto, sent to its deposit address, sold at
 * the off-ramp and paid to a beneficiary's bank account. SPEC names only the events; the states and transitions are
 * ours (docs/payouts.md):
 *
 *   awaiting_deposit --deposit detected--> deposit_detected --into the off-ramp--> forwarded
 *   (deposit_detected records the sweep to the off-ramp, PayoutDepositSwept, before it is forwarded: no state of its
 *   own, but from then on the deposit's funds are at the off-ramp, as a forwarded payout's)
 *   forwarded --fiat delivered--> completed
 *   deposit_detected | forwarded --will not complete--> failed (failure_reason) --funds returned--> refunded
 *
 * Funds are returned by the off-ramp (a failure after the forward) or, for a payout held at the deposit address,
 * by the merchant's signed refund from that address (POST /payouts/:id/refund_held, `heldRefund`).
 */
export type PayoutStatus =
  'awaiting_deposit' | 'deposit_detected' | 'forwarded' | 'completed' | 'failed' | 'refunded';

export const PAYOUT_CATEGORY = 'payout';
export const payoutStreamId = (id: string): string => `${PAYOUT_CATEGORY}-${id}`;
export const PAYOUT_ID = /^po_[0-9a-z]{26}$/;

/**
 * Why a payout failed: the fiat-settlement vocabulary of SPEC "Fiat settlement delay and failure" where it fits
 * (the off-ramp is the same kind of provider), plus our own for what happens before the off-ramp.
 */
export const PAYOUT_FAILURE_REASONS = [
  'deposit_not_credited',
  'rampoff_order_failed',
  'rampoff_withdraw_failed',
  'provider_rejected',
  /** Ours: the depositing wallet matched the sanctions screening; the funds are returned, never sold. */
  'sender_flagged',
  /**
   * Ours: the customer was no longer `active` (suspended, ...) when its deposit was about to go to the off-ramp; the
   * funds are held for compliance (like `sender_flagged`), never swept, sold or sent back.
   */
  'customer_not_active',
  /**
   * Ours: the payout's deposit address is not one this deployment can sweep (the customer was created with an older
   * PayoutDepositFactory or another off-ramp; the address is in its creation fact). Terminal, instead of a sweep
   * retried forever; the funds stay at that address for the operator.
   */
  'deposit_address_retired',
] as const;
export type PayoutFailureReason = (typeof PAYOUT_FAILURE_REASONS)[number];
/**
 * Failures before the sweep: the funds are still at the deposit address, so the off-ramp never sends them back (no
 * automatic PayoutRefunded). Of these, only `customer_not_active` can be returned by the merchant
 * (REFUNDABLE_HELD_REASONS).
 */
export const HELD_FAILURE_REASONS: readonly PayoutFailureReason[] = [
  'sender_flagged',
  'customer_not_active',
  'deposit_address_retired',
];
/**
 * Held payouts the merchant may return to their sender (POST /payouts/:id/refund_held). Not `sender_flagged`: a
 * sanctioned wallet's funds are frozen, never sent back to it. Not `deposit_address_retired`: this deployment's
 * factory cannot move funds at that address.
 */
export const REFUNDABLE_HELD_REASONS: readonly PayoutFailureReason[] = ['customer_not_active'];

export const PAYOUT_LIMITS = {
  /** Ours: at most 24 digits of token minor units (far beyond any payout, far inside uint256). */
  maxAmountDigits: 24,
} as const;

export interface PayoutToken {
  readonly chain: string;
  readonly symbol: string;
  /** CAIP-19 id of the token on that chain. */
  readonly asset: string;
  readonly decimals: number;
}

export interface PayoutDeposit {
  readonly txHash: string;
  readonly from: string;
  readonly amount: string;
  readonly detectedAt: string;
  /**
   * The transfer's log in `txHash`: one transaction can carry several transfers to the address (a batch sender),
   * each its own deposit. Absent on facts recorded before it was kept.
   */
  readonly logIndex?: number;
  /** Reported by the test helper (docs/payouts.md): no transaction moved anything, so there is nothing to sweep. */
  readonly simulated?: true;
  /**
   * The log named no sender (tokens minted straight to the address: a bridge such as CCTP, an issuer's mint): `from`
   * is the minting transaction's sender, for a bridge whoever relayed it, not known to be the customer's wallet, so
   * nothing is returned to it (docs/payouts.md, "Held funds"). Absent before the field: not minted.
   */
  readonly minted?: true;
}

export type PayoutEvent =
  | {
      type: 'PayoutCreated.v1';
      data: {
        payoutId: string;
        customerId: string;
        beneficiaryId: string;
        amount: string;
        currency: string;
        token: PayoutToken;
        depositAddress: string;
        metadata: Record<string, string>;
        createdAt: string;
      };
    }
  | { type: 'PayoutDepositDetected.v1'; data: PayoutDeposit }
  | {
      type: 'PayoutForwarded.v1';
      /**
       * `forwardTxHash`: the operator's sweep of the deposit to the off-ramp; absent in facts recorded before the
       * sweep was wired, null where no transaction moved anything (the chain-less sandbox, a test-helper deposit).
       */
      data: { transferId: string; forwardTxHash?: string | null; forwardedAt: string };
    }
  | {
      /**
       * The operator's sweep moved the deposit to the off-ramp (the transaction landed, or a retry found this
       * payout's sweep on chain). Recorded before the off-ramp is asked: from here a retraction can no longer put the
       * payout back to awaiting a deposit, since the funds left the address (docs/payouts.md, "Reorgs").
       */
      type: 'PayoutDepositSwept.v1';
      data: { txHash: string; sweptAt: string };
    }
  | {
      /**
       * The operator signed a sweep of the deposit (`txHash`, `nonce` of the operator key) and is about to broadcast
       * it: recorded first, so a flow stopped before the sweep landed can still find it in a node's pool (a retry
       * that finds the deposit retracted meanwhile waits for it to be mined or dropped; docs/payouts.md, "Reorgs").
       */
      type: 'PayoutSweepSent.v1';
      data: { txHash: string; nonce: number; sentAt: string };
    }
  | {
      /** The deposit's block was orphaned by a reorg before the payout was swept: it waits for a deposit again. */
      type: 'PayoutDepositRetracted.v1';
      data: { txHash: string; retractedAt: string };
    }
  | {
      /**
       * A reorg orphaned the block of a swept payout's deposit, hence of its sweep (`txHash`, mined after it): the
       * funds may be back at the deposit address on the new fork. Until the payout's sweep is found on the new
       * fork or redone (PayoutDepositSwept again), the sweep is not known to be canonical (docs/payouts.md, "Reorgs").
       */
      type: 'PayoutSweepOrphaned.v1';
      data: { txHash: string; orphanedAt: string };
    }
  | {
      /**
       * The orphaned sweep's deposit, the same transfer, was observed again on the new fork (confirmed; `logIndex`
       * its log in the new block): the sweep can be redone from it.
       */
      type: 'PayoutDepositReincluded.v1';
      data: { txHash: string; logIndex: number; reincludedAt: string };
    }
  | { type: 'PayoutCompleted.v1'; data: { fiatAmount: string; completedAt: string } }
  | {
      type: 'PayoutFailed.v1';
      /**
       * `refundWithheld`: a failure at the off-ramp whose refund is not asked for (`refundWithheldReason`), the funds
       * left with the off-ramp for the operator. Absent: the off-ramp returns them (or, for a held reason, nothing
       * left the deposit address); failures recorded before the field never carry it.
       */
      data: { reason: PayoutFailureReason; failedAt: string; refundWithheld?: PayoutRefundWithheldReason };
    }
  | {
      type: 'PayoutRefunded.v1';
      /**
       * `reference`: the off-ramp's refund reference (absent on a held refund). `txHash`: the deposit address's
       * refund transaction of a held payout (absent on the off-ramp's refunds, null for a test-helper deposit that
       * no transaction put there).
       */
      data: { to: string; amount: string; reference?: string; txHash?: string | null; refundedAt: string };
    };

/** Why the off-ramp's refund of a payout failed at the off-ramp is not asked for (PayoutFailed `refundWithheld`). */
export const PAYOUT_REFUND_WITHHELD_REASONS = ['deposit_minted'] as const;
export type PayoutRefundWithheldReason = (typeof PAYOUT_REFUND_WITHHELD_REASONS)[number];

/** A payout's refund as the object shows it. */
export interface PayoutRefund {
  readonly to: string;
  readonly amount: string;
  readonly reference: string | null;
  readonly txHash: string | null;
  readonly refundedAt: string;
}

export interface PayoutState {
  readonly exists: boolean;
  readonly id: string;
  readonly customerId: string;
  readonly beneficiaryId: string;
  readonly amount: string;
  readonly currency: string;
  readonly token: PayoutToken;
  readonly depositAddress: string;
  readonly metadata: Record<string, string>;
  readonly status: PayoutStatus;
  readonly deposit: PayoutDeposit | null;
  /** The sweep that moved the deposit to the off-ramp (PayoutDepositSwept); null before it landed. */
  readonly sweepTxHash: string | null;
  /** That sweep, while a reorg left it orphaned (PayoutSweepOrphaned) and it was not found or redone since. */
  readonly orphanedSweepTxHash: string | null;
  /** Every sweep transaction signed for this payout (PayoutSweepSent), oldest first: mined, pending or dropped. */
  readonly sentSweepTxHashes: readonly string[];
  readonly transferId: string | null;
  readonly forwardTxHash: string | null;
  readonly fiatAmount: string | null;
  readonly failureReason: PayoutFailureReason | null;
  readonly refund: PayoutRefund | null;
  /** The off-ramp's refund is not asked for, the funds left with it for the operator (PayoutFailed). */
  readonly refundWithheld: {
    readonly reason: PayoutRefundWithheldReason;
    readonly withheldAt: string;
  } | null;
  readonly createdAt: string;
  readonly updatedAt: string;
}

export const initialPayoutState = (): PayoutState => ({
  exists: false,
  id: '',
  customerId: '',
  beneficiaryId: '',
  amount: '0',
  currency: '',
  token: { chain: '', symbol: '', asset: '', decimals: 0 },
  depositAddress: '',
  metadata: {},
  status: 'awaiting_deposit',
  deposit: null,
  sweepTxHash: null,
  orphanedSweepTxHash: null,
  sentSweepTxHashes: [],
  transferId: null,
  forwardTxHash: null,
  fiatAmount: null,
  failureReason: null,
  refund: null,
  refundWithheld: null,
  createdAt: '',
  updatedAt: '',
});

export function evolvePayout(state: PayoutState, event: PayoutEvent): PayoutState {
  switch (event.type) {
    case 'PayoutCreated.v1': {
      const { payoutId, createdAt, ...facts } = event.data;
      return { ...state, ...facts, exists: true, id: payoutId, createdAt, updatedAt: createdAt };
    }
    case 'PayoutDepositDetected.v1':
      return { ...state, status: 'deposit_detected', deposit: event.data, updatedAt: event.data.detectedAt };
    case 'PayoutDepositSwept.v1':
      return {
        ...state,
        sweepTxHash: event.data.txHash,
        orphanedSweepTxHash: null,
        // A sweep redone after a reorg is the forward's transaction from now on.
        forwardTxHash:
          state.forwardTxHash !== null && state.forwardTxHash === state.sweepTxHash
            ? event.data.txHash
            : state.forwardTxHash,
        updatedAt: event.data.sweptAt,
      };
    // None of these changes what the API shows (no webhook either), so the object's updated_at stays.
    case 'PayoutSweepSent.v1':
      return { ...state, sentSweepTxHashes: [...state.sentSweepTxHashes, event.data.txHash] };
    case 'PayoutSweepOrphaned.v1':
      return { ...state, orphanedSweepTxHash: event.data.txHash };
    case 'PayoutDepositReincluded.v1':
      return { ...state, deposit: state.deposit && { ...state.deposit, logIndex: event.data.logIndex } };
    case 'PayoutDepositRetracted.v1':
      // A held failure stays failed (terminal): only its deposit is gone, so nothing is held for it any more.
      return {
        ...state,
        status: state.status === 'failed' ? 'failed' : 'awaiting_deposit',
        deposit: null,
        updatedAt: event.data.retractedAt,
      };
    case 'PayoutForwarded.v1':
      return {
        ...state,
        status: 'forwarded',
        transferId: event.data.transferId,
        forwardTxHash: event.data.forwardTxHash ?? null,
        updatedAt: event.data.forwardedAt,
      };
    case 'PayoutCompleted.v1':
      return {
        ...state,
        status: 'completed',
        fiatAmount: event.data.fiatAmount,
        updatedAt: event.data.completedAt,
      };
    case 'PayoutFailed.v1':
      return {
        ...state,
        status: 'failed',
        failureReason: event.data.reason,
        refundWithheld: event.data.refundWithheld
          ? { reason: event.data.refundWithheld, withheldAt: event.data.failedAt }
          : null,
        updatedAt: event.data.failedAt,
      };
    case 'PayoutRefunded.v1':
      return {
        ...state,
        status: 'refunded',
        refundWithheld: null,
        refund: {
          to: event.data.to,
          amount: event.data.amount,
          reference: event.data.reference ?? null,
          txHash: event.data.txHash ?? null,
          refundedAt: event.data.refundedAt,
        },
        updatedAt: event.data.refundedAt,
      };
  }
}

/** POST /payouts as received. */
export interface CreatePayoutInput {
  readonly customer?: unknown;
  readonly beneficiary?: unknown;
  readonly amount?: unknown;
  readonly currency?: unknown;
  readonly chain?: unknown;
  readonly token?: unknown;
  readonly metadata?: unknown;
}

/** What deciding a create needs besides the input (read by the owner from its read models and chain registry). */
export interface CreatePayoutContext {
  readonly customer: {
    readonly id: string;
    readonly status: CustomerStatus;
    readonly depositAddress: string;
    /**
     * The customer's address is not the one this deployment derives for it now (an older PayoutDepositFactory or
     * another off-ramp): a deposit there could never be swept, so no payout is created for it.
     */
    readonly depositAddressRetired?: boolean;
  };
  readonly beneficiary: { readonly id: string; readonly currency: string };
  /** The tokens a payout may be funded with in the merchant's mode. */
  readonly tokens: readonly PayoutToken[];
}

export type PayoutCommand =
  | { type: 'CreatePayout'; id: string; input: CreatePayoutInput; context: CreatePayoutContext; now: Date }
  | {
      type: 'RecordDeposit';
      txHash: string;
      logIndex?: number;
      from: string;
      amount: string;
      simulated?: boolean;
      minted?: boolean;
      now: Date;
    }
  /** Before the off-ramp: the customer as it is now (its aggregate, not a read model that may lag). */
  | { type: 'RecheckCustomer'; customerStatus: CustomerStatus; now: Date }
  /** A sweep of the deposit was signed and is about to be broadcast. */
  | { type: 'RecordSweepSent'; txHash: string; nonce: number; now: Date }
  /** The sweep of the deposit to the off-ramp landed (its transaction). */
  | { type: 'RecordSwept'; txHash: string; now: Date }
  | { type: 'RecordForwarded'; transferId: string; forwardTxHash: string | null; now: Date }
  | { type: 'RetractDeposit'; txHash: string; now: Date }
  /** The retraction of a swept payout's deposit (refused as deposit_already_forwarded) orphaned its sweep. */
  | { type: 'RecordSweepOrphaned'; txHash: string; now: Date }
  /** The deposit of a payout whose sweep is orphaned was observed again on the new fork. */
  | { type: 'RecordDepositReincluded'; txHash: string; logIndex: number; now: Date }
  | { type: 'RecordCompleted'; fiatAmount: string; now: Date }
  | { type: 'RecordFailed'; reason: PayoutFailureReason; now: Date }
  | { type: 'RecordRefunded'; to: string; amount: string; reference: string; now: Date }
  /**
   * The operator had the off-ramp return a withheld refund (docs/payouts.md, "Refund withheld at the off-ramp") to
   * `to`, the wallet the customer confirmed; `txHash` and `reference` are the off-ramp's proof of it.
   */
  | {
      type: 'RecordWithheldRefundReturned';
      to: string;
      txHash?: string;
      reference?: string;
      now: Date;
    }
  /** The merchant's signed refund of a held payout left the deposit address (`txHash`; null: nothing on chain). */
  | {
      type: 'RecordHeldRefunded';
      txHash: string | null;
      /** The destination the merchant signed; required for a minted deposit (`heldRefund`). */
      to?: string;
      now: Date;
    };

const DIGITS = /^(0|[1-9][0-9]*)$/;

export function parsePayoutAmount(value: unknown): string {
  const what = 'a string of digits: the token amount in its smallest unit ("25000000" is 25 USDC)';
  if (value === undefined || value === null) throw validationError('amount', `amount is required: ${what}.`);
  if (typeof value !== 'string' || !DIGITS.test(value) || value.length > PAYOUT_LIMITS.maxAmountDigits)
    throw validationError(
      'amount',
      `amount must be ${what}, at most ${PAYOUT_LIMITS.maxAmountDigits} digits.`,
    );
  if (BigInt(value) === 0n) throw validationError('amount', 'amount must be greater than 0.');
  return value;
}

function decideCreate(
  command: Extract<PayoutCommand, { type: 'CreatePayout' }>,
  state: PayoutState,
): PayoutEvent[] {
  if (state.exists) throw conflict('resource_exists', `Payout ${command.id} already exists.`);
  const { input, context } = command;
  const amount = parsePayoutAmount(input.amount);
  if (typeof input.chain !== 'string' || input.chain.length === 0)
    throw validationError('chain', 'chain is required: a CAIP-2 chain id such as eip155:8453.');
  if (typeof input.token !== 'string' || input.token.length === 0)
    throw validationError('token', 'token is required: a token symbol such as USDC.');
  const onChain = context.tokens.filter((t) => t.chain === input.chain);
  if (onChain.length === 0)
    throw validationError(
      'chain',
      `chain must be one of ${[...new Set(context.tokens.map((t) => t.chain))].join(', ')}.`,
    );
  const symbol = input.token.toUpperCase();
  const token = onChain.find((t) => t.symbol === symbol);
  if (!token)
    throw validationError(
      'token',
      `token must be one of ${onChain.map((t) => t.symbol).join(', ')} on ${input.chain}.`,
    );
  const currency =
    input.currency === undefined || input.currency === null
      ? context.beneficiary.currency
      : typeof input.currency === 'string'
        ? input.currency.toUpperCase()
        : '';
  if (currency !== context.beneficiary.currency)
    throw validationError(
      'currency',
      `currency must be the beneficiary's currency (${context.beneficiary.currency}).`,
    );
  const metadata = parseMetadata(input.metadata);
  // SPEC: "rejected for customers that are not active"; decided last, so a malformed request is 400 whatever the
  // customer's state.
  if (context.customer.status !== 'active')
    throw cannotProcess(
      'customer_not_active',
      `Customer ${context.customer.id} is ${context.customer.status}; a payout needs an active customer (KYC passed).`,
      'customer',
    );
  if (context.customer.depositAddressRetired)
    throw cannotProcess(
      'deposit_address_retired',
      `Customer ${context.customer.id}'s deposit address ${context.customer.depositAddress} is retired (made by an earlier deposit contract this deployment no longer sweeps): create the customer again for a current address.`,
      'customer',
    );
  return [
    {
      type: 'PayoutCreated.v1',
      data: {
        payoutId: command.id,
        customerId: context.customer.id,
        beneficiaryId: context.beneficiary.id,
        amount,
        currency,
        token,
        depositAddress: context.customer.depositAddress,
        metadata,
        createdAt: command.now.toISOString(),
      },
    },
  ];
}

/** A transition from `from` only; the same fact again (a redelivered step) appends nothing. */
function transition(
  state: PayoutState,
  from: readonly PayoutStatus[],
  to: PayoutStatus,
  what: string,
): boolean {
  if (!state.exists) throw notFound('payout');
  if (state.status === to) return false;
  if (!from.includes(state.status))
    throw conflict('payout_state', `A ${state.status} payout cannot ${what}.`);
  return true;
}

/**
 * The deposit this payout already took: the same transfer log. Another log of the same transaction is another
 * deposit (refused by a funded payout, so the intake offers it to the next payout instead of dropping it).
 */
function isSameDeposit(
  deposit: PayoutDeposit | null,
  command: { readonly txHash: string; readonly logIndex?: number },
): boolean {
  if (deposit?.txHash !== command.txHash) return false;
  return (
    deposit.logIndex === undefined || command.logIndex === undefined || deposit.logIndex === command.logIndex
  );
}

export function decidePayout(command: PayoutCommand, state: PayoutState): PayoutEvent[] {
  const at = command.now.toISOString();
  switch (command.type) {
    case 'CreatePayout':
      return decideCreate(command, state);
    case 'RecordDeposit':
      // The same deposit again changes nothing; another one is refused (409), so the intake offers it to the next
      // payout waiting for it instead of losing it to one that is already funded.
      if (isSameDeposit(state.deposit, command)) return [];
      if (state.status !== 'awaiting_deposit' && state.exists)
        throw conflict('payout_state', `A ${state.status} payout cannot take another deposit.`);
      if (!transition(state, ['awaiting_deposit'], 'deposit_detected', 'take a deposit')) return [];
      return [
        {
          type: 'PayoutDepositDetected.v1',
          data: {
            txHash: command.txHash,
            ...(command.logIndex !== undefined ? { logIndex: command.logIndex } : {}),
            from: command.from,
            amount: command.amount,
            detectedAt: at,
            ...(command.simulated ? { simulated: true as const } : {}),
            ...(command.minted ? { minted: true as const } : {}),
          },
        },
      ];
    case 'RecheckCustomer':
      // SPEC: payouts are for active customers only; one suspended after the payout was created is not paid out.
      // Once swept the funds are at the off-ramp: failing the payout as held would hold nothing.
      if (command.customerStatus === 'active' || state.status !== 'deposit_detected' || state.sweepTxHash)
        return [];
      return [{ type: 'PayoutFailed.v1', data: { reason: 'customer_not_active', failedAt: at } }];
    case 'RecordSweepSent':
      if (!state.exists) throw notFound('payout');
      if (state.sentSweepTxHashes.includes(command.txHash)) return [];
      // A deposit retracted since the flow last read the payout: nothing of its own is at the address to sweep, and
      // the refusal keeps the sweep from being broadcast.
      if (!state.deposit) throw conflict('payout_state', `A ${state.status} payout has no deposit to sweep.`);
      return [
        {
          type: 'PayoutSweepSent.v1',
          data: { txHash: command.txHash, nonce: command.nonce, sentAt: at },
        },
      ];
    case 'RecordSwept':
      if (!state.exists) throw notFound('payout');
      // After a reorg orphaned the sweep: the one found on the new fork (maybe the same, mined again) or redone.
      if (state.orphanedSweepTxHash !== null)
        return [{ type: 'PayoutDepositSwept.v1', data: { txHash: command.txHash, sweptAt: at } }];
      // The same sweep again (a retry that found it on chain) changes nothing; a later state knows it already.
      if (state.sweepTxHash === command.txHash || (state.status !== 'deposit_detected' && state.deposit))
        return [];
      // Retracted (no deposit any more) while the sweep was in flight: the caller flags funds that left the
      // address for a payout that has none.
      if (state.status !== 'deposit_detected')
        throw conflict('payout_state', `A ${state.status} payout has no deposit to have swept.`);
      if (state.sweepTxHash)
        throw conflict(
          'payout_state',
          `The deposit of this payout was swept already (${state.sweepTxHash}).`,
        );
      return [{ type: 'PayoutDepositSwept.v1', data: { txHash: command.txHash, sweptAt: at } }];
    case 'RecordForwarded':
      if (!transition(state, ['deposit_detected'], 'forwarded', 'be forwarded')) return [];
      return [
        {
          type: 'PayoutForwarded.v1',
          data: { transferId: command.transferId, forwardTxHash: command.forwardTxHash, forwardedAt: at },
        },
      ];
    case 'RetractDeposit':
      // Another transaction's retraction, or one already undone: nothing to do.
      if (state.deposit?.txHash !== command.txHash) return [];
      // Failed before any sweep (held): nothing ever left the address, so the reorg only takes the deposit away;
      // the payout stays failed, and its refund_held is refused (no deposit to return).
      if (state.status === 'failed' && isHeldFailure(state) && !state.sweepTxHash)
        return [{ type: 'PayoutDepositRetracted.v1', data: { txHash: command.txHash, retractedAt: at } }];
      // Once swept (forwarded or not yet) the funds left the deposit address: only the operator can sort it out
      // (the caller flags it). Put back to awaiting_deposit, a swept payout's forward would be refused for good.
      if (state.status !== 'deposit_detected' || state.sweepTxHash)
        throw conflict(
          'deposit_already_forwarded',
          `The deposit of this ${state.status} payout was retracted by a reorg after it was swept to the off-ramp.`,
        );
      return [{ type: 'PayoutDepositRetracted.v1', data: { txHash: command.txHash, retractedAt: at } }];
    case 'RecordSweepOrphaned':
      if (!state.exists) throw notFound('payout');
      // Another sweep than the recorded one, or orphaned already: nothing new.
      if (state.sweepTxHash !== command.txHash || state.orphanedSweepTxHash === command.txHash) return [];
      return [{ type: 'PayoutSweepOrphaned.v1', data: { txHash: command.txHash, orphanedAt: at } }];
    case 'RecordDepositReincluded':
      if (!state.exists) throw notFound('payout');
      // Only an orphaned sweep's own deposit matters: any other payout's sweep stands.
      if (
        state.orphanedSweepTxHash === null ||
        state.deposit?.txHash.toLowerCase() !== command.txHash.toLowerCase()
      )
        return [];
      return [
        {
          type: 'PayoutDepositReincluded.v1',
          data: { txHash: state.deposit.txHash, logIndex: command.logIndex, reincludedAt: at },
        },
      ];
    case 'RecordCompleted':
      if (!transition(state, ['forwarded'], 'completed', 'complete')) return [];
      return [{ type: 'PayoutCompleted.v1', data: { fiatAmount: command.fiatAmount, completedAt: at } }];
    case 'RecordFailed':
      // A held reason says the funds are at the deposit address; once the sweep is recorded they are at the off-ramp,
      // unless a reorg orphaned it and it was not found or redone since (the deposit is back at the address).
      if (
        HELD_FAILURE_REASONS.includes(command.reason) &&
        state.sweepTxHash &&
        state.orphanedSweepTxHash === null &&
        state.status === 'deposit_detected'
      )
        throw conflict(
          'payout_state',
          `The deposit of this payout was swept already (${state.sweepTxHash}): it cannot fail ${command.reason}.`,
        );
      if (!transition(state, ['deposit_detected', 'forwarded'], 'failed', 'fail')) return [];
      {
        // Decided with the failure, so payout.failed's object already tells the merchant where the funds wait.
        const withheld = refundWithheldReason({ ...state, status: 'failed', failureReason: command.reason });
        return [
          {
            type: 'PayoutFailed.v1',
            data: {
              reason: command.reason,
              failedAt: at,
              ...(withheld ? { refundWithheld: withheld } : {}),
            },
          },
        ];
      }
    case 'RecordHeldRefunded': {
      // A retry after the refund was recorded (the same transaction found again) appends nothing.
      if (state.status === 'refunded' && state.refund?.txHash === command.txHash) return [];
      const { to, amount } = heldRefund(state, command.to);
      return [
        {
          type: 'PayoutRefunded.v1',
          data: { to, amount, txHash: command.txHash, refundedAt: at },
        },
      ];
    }
    case 'RecordWithheldRefundReturned': {
      const { amount } = withheldRefundReturn(state);
      return [
        {
          type: 'PayoutRefunded.v1',
          data: {
            to: command.to,
            amount,
            ...(command.reference !== undefined ? { reference: command.reference } : {}),
            ...(command.txHash !== undefined ? { txHash: command.txHash } : {}),
            refundedAt: at,
          },
        },
      ];
    }
    case 'RecordRefunded':
      if (!transition(state, ['failed'], 'refunded', 'be refunded')) return [];
      return [
        {
          type: 'PayoutRefunded.v1',
          data: { to: command.to, amount: command.amount, reference: command.reference, refundedAt: at },
        },
      ];
  }
}

/**
 * Why the off-ramp must not be asked to refund this payout, or null when it may be (or nothing is its to refund).
 * Only a payout failed at the off-ramp (swept; not a held reason) is the off-ramp's to return, always to
 * `deposit.from`: for a minted deposit that account sent the minting transaction (for a bridge, its relayer,
 * anyone), so the refund is withheld and the funds stay with the off-ramp for the operator.
 */
export function refundWithheldReason(state: PayoutState): PayoutRefundWithheldReason | null {
  if (state.status !== 'failed' || !state.deposit || isHeldFailure(state)) return null;
  return state.deposit.minted ? 'deposit_minted' : null;
}

/**
 * Whether a held payout's deposit may go back to its sender (POST /payouts/:id/refund_held), and what goes where:
 * always the payout's own deposit (amount) to the wallet it came from (`deposit.from`), never the address's balance
 * nor a destination of the caller's choosing. A minted deposit names no wallet it came from (`deposit.from` sent
 * the minting transaction: for a bridge, its relayer): it goes only to the destination `to` the merchant signs, and
 * is refused without one. Throws the API's error otherwise; the caller checks this before it sends anything on
 * chain, and the decider again when the refund is recorded.
 */
export function heldRefund(state: PayoutState, to?: string): { to: string; amount: string } {
  if (!state.exists) throw notFound('payout');
  const what = `Payout ${state.id}`;
  if (state.status === 'refunded') throw conflict('payout_already_refunded', `${what} was already refunded.`);
  const reason = state.failureReason;
  if (state.status === 'failed' && isHeldFailure(state) && !state.deposit)
    throw conflict(
      'deposit_retracted',
      `${what}'s deposit was retracted by a chain reorg: nothing is held at the deposit address for it.`,
    );
  if (state.status !== 'failed' || !reason || !state.deposit)
    throw conflict(
      'payout_not_refundable',
      `${what} is ${state.status}: only a failed payout whose funds are held at its deposit address can be refunded.`,
    );
  if (reason === 'sender_flagged')
    throw cannotProcess(
      'sender_flagged',
      `${what}'s sender matched the sanctions screening: its funds are frozen and never sent back.`,
    );
  if (reason === 'deposit_address_retired')
    throw conflict(
      'deposit_address_retired',
      `${what}'s funds are at a retired deposit address (${state.depositAddress}) that this deployment cannot move: the operator returns them.`,
    );
  if (!REFUNDABLE_HELD_REASONS.includes(reason))
    throw conflict(
      'payout_not_refundable',
      state.deposit.minted
        ? `${what} failed at the off-ramp (${reason}): its funds are with the off-ramp, not at the deposit address, and its minted deposit names no wallet to return them to: the operator returns them to a wallet the customer names.`
        : `${what} failed at the off-ramp (${reason}): its funds are not held at the deposit address, the off-ramp returns them.`,
    );
  if (state.deposit.minted) {
    if (to === undefined)
      throw cannotProcess(
        'refund_destination_required',
        `${what}'s deposit was minted to its address (a bridge such as CCTP, an issuer's mint): its minting transaction's sender ${state.deposit.from} need not be the customer. Name the customer's wallet as to and sign the PayoutRefund with it.`,
        'to',
      );
    return { to, amount: state.deposit.amount };
  }
  if (to !== undefined && to.toLowerCase() !== state.deposit.from.toLowerCase())
    throw validationError(
      'to',
      `${what}'s deposit goes back to the wallet it came from (${state.deposit.from}); to is taken only for a minted deposit.`,
      'refund_destination_fixed',
    );
  return { to: state.deposit.from, amount: state.deposit.amount };
}

/**
 * Whether the operator may record the off-ramp's return of a withheld refund, and its amount: always the payout's
 * deposit (what the off-ramp holds for it), never one the caller names. Only a payout whose refund is withheld
 * (`refundWithheld`, or `refundWithheldReason` for a failure recorded before that field), once: a refunded payout is
 * 409 `payout_already_refunded`, any other 409 `refund_not_withheld`, so a payout the off-ramp refunds itself is
 * never recorded twice.
 */
export function withheldRefundReturn(state: PayoutState): { amount: string } {
  if (!state.exists) throw notFound('payout');
  const what = `Payout ${state.id}`;
  if (state.status === 'refunded') throw conflict('payout_already_refunded', `${what} was already refunded.`);
  // A failure recorded before `refundWithheld` was kept reads as none withheld, but the flow withholds its refund all
  // the same (refundWithheldReason) and alerts: the operator's return of it is recorded as any other.
  const withheld = state.refundWithheld !== null || refundWithheldReason(state) !== null;
  if (state.status !== 'failed' || !withheld || !state.deposit)
    throw conflict(
      'refund_not_withheld',
      `${what} is ${state.status} and its refund is not withheld at the off-ramp: there is no withheld refund to record as returned.`,
    );
  return { amount: state.deposit.amount };
}

/** POST /admin/merchants/:merchantId/payouts/:id/withheld-refund-returns as received. */
export interface WithheldRefundReturnInput {
  readonly to?: unknown;
  readonly tx_hash?: unknown;
  readonly reference?: unknown;
}

/** The off-ramp's return of a withheld refund as the operator reports it, its types checked. */
export interface WithheldRefundReturn {
  readonly to: string;
  readonly txHash?: string;
  readonly reference?: string;
}

const TX_HASH = /^0x[0-9a-fA-F]{64}$/;
// An off-ramp's refund id as its API gives it: printable, no spaces, bounded like our other references.
const OFF_RAMP_REFERENCE = /^[\x21-\x7e]{1,255}$/;
const WITHHELD_RETURN_FIELDS = ['to', 'tx_hash', 'reference'] as const;

export function parseWithheldRefundReturnInput(input: unknown): WithheldRefundReturn {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) throw bodyNotAnObject();
  const fields = input as Record<string, unknown>;
  const unknown = Object.keys(fields).find(
    (k) => !(WITHHELD_RETURN_FIELDS as readonly string[]).includes(k) && fields[k] !== undefined,
  );
  if (unknown !== undefined) throw unknownParameter(unknown, takesFields(WITHHELD_RETURN_FIELDS));
  const { to, tx_hash: txHash, reference } = fields as WithheldRefundReturnInput;
  if (to === undefined || to === null)
    throw validationError(
      'to',
      'to is required: the wallet the customer confirmed, where the off-ramp returned the funds.',
    );
  // EIP-55: a mixed-case address with a wrong checksum is a typo pointing at another account (and the screening
  // and the signature check would throw on it: a 500).
  const returnedTo = parseAddress(to, 'to', { nonZero: true });
  if (txHash !== undefined && (typeof txHash !== 'string' || !TX_HASH.test(txHash)))
    throw validationError(
      'tx_hash',
      "tx_hash must be a 32-byte 0x-hex transaction hash: the off-ramp's transfer of the funds to `to`.",
      'invalid_tx_hash',
    );
  if (reference !== undefined && (typeof reference !== 'string' || !OFF_RAMP_REFERENCE.test(reference)))
    throw validationError(
      'reference',
      "reference must be the off-ramp's refund reference: 1 to 255 printable characters, no spaces.",
    );
  // The return happened outside our system: without the off-ramp's proof of it nothing says it did.
  if (txHash === undefined && reference === undefined)
    throw validationError(
      'tx_hash',
      "tx_hash is required unless reference is given: the off-ramp's proof of the return (its transaction, or its refund reference).",
    );
  return {
    to: returnedTo,
    ...(txHash !== undefined ? { txHash } : {}),
    ...(reference !== undefined ? { reference } : {}),
  };
}

function isHeldFailure(state: PayoutState): boolean {
  return state.failureReason !== null && HELD_FAILURE_REASONS.includes(state.failureReason);
}

/** POST /payouts/:id/refund_held as received. */
export interface RefundHeldInput {
  readonly deadline?: unknown;
  readonly signature?: unknown;
  readonly to?: unknown;
}

/** What the merchant signed (`PayoutRefund`, docs/payouts.md "Held funds"), its types checked. */
export interface SignedHeldRefund {
  /** Unix seconds, the one signed (the contract refuses one past or more than 7 days ahead). */
  readonly deadline: bigint;
  /** 65 bytes, 0x-hex. */
  readonly signature: string;
  /** The destination signed, for a minted deposit (`heldRefund`); absent otherwise. */
  readonly to?: string;
}

const UINT = /^(0|[1-9][0-9]{0,77})$/;
const SIGNATURE = /^0x[0-9a-fA-F]{130}$/;

export function parseRefundHeldInput(input: RefundHeldInput): SignedHeldRefund {
  const { deadline, signature, to } = input;
  const seconds =
    typeof deadline === 'number' && Number.isSafeInteger(deadline) && deadline >= 0
      ? BigInt(deadline)
      : typeof deadline === 'string' && UINT.test(deadline) && BigInt(deadline) <= MAX_UINT256
        ? BigInt(deadline)
        : null;
  if (seconds === null)
    throw validationError(
      'deadline',
      tooLargeFault('deadline', deadline) ??
        fieldFault(
          'deadline',
          deadline,
          'the unix seconds the PayoutRefund signature names (number or decimal string)',
        ),
      'invalid_deadline',
    );
  if (typeof signature !== 'string' || !SIGNATURE.test(signature))
    throw validationError(
      'signature',
      "signature is required: the merchant signer's 65-byte 0x-hex EIP-712 PayoutRefund signature (signPayoutRefund).",
      'invalid_signature',
    );
  if (to === undefined) return { deadline: seconds, signature };
  return { deadline: seconds, signature, to: parseAddress(to, 'to', { nonZero: true }) };
}

export const payoutDecider = { initialState: initialPayoutState, evolve: evolvePayout, decide: decidePayout };

export interface PayoutObject {
  readonly id: string;
  readonly object: 'payout';
  readonly customer: string;
  readonly beneficiary: string;
  readonly status: PayoutStatus;
  /** Token minor units the customer sends. */
  readonly amount: string;
  /** Token symbol and CAIP-2 chain of the deposit. */
  readonly token: string;
  readonly chain: string;
  /** The token's CAIP-19 id (`eip155:8453/erc20:0x...`): what a PayoutRefund signature names. */
  readonly asset: string;
  /** The fiat currency the beneficiary receives (ISO 4217). */
  readonly currency: string;
  /** Fiat minor units delivered; null until completed. */
  readonly fiat_amount: string | null;
  readonly deposit_address: string;
  readonly deposit: {
    readonly tx_hash: string;
    readonly from: string;
    /** Ours: minted straight to the address; `from` then sent the minting transaction (not known to be the customer). */
    readonly minted: boolean;
    readonly amount: string;
    readonly detected_at: string;
  } | null;
  /** The operator's sweep of the deposit into the off-ramp (payout.forwarded); null when no transaction moved it. */
  readonly forward_tx_hash: string | null;
  readonly failure_reason: PayoutFailureReason | null;
  /**
   * The funds returned to the sender: by the off-ramp (`tx_hash` null: it reports a reference, not a transaction) or,
   * for a held payout, from the deposit address (`tx_hash` the refund's transaction; null for a test-helper deposit).
   */
  readonly refund: {
    readonly to: string;
    readonly amount: string;
    readonly tx_hash: string | null;
    readonly refunded_at: string;
  } | null;
  /**
   * Ours: a payout failed at the off-ramp whose refund the flow did not ask for (`reason` `deposit_minted`: its
   * deposit was minted, so no wallet it came from is known); the funds are with the off-ramp until the operator
   * returns them (docs/payouts.md, "Held funds"). Null otherwise.
   */
  readonly refund_withheld: {
    readonly reason: PayoutRefundWithheldReason;
    readonly withheld_at: string;
  } | null;
  readonly metadata: Record<string, string>;
  readonly created_at: string;
  readonly updated_at: string;
}

export function payoutObject(state: PayoutState): PayoutObject {
  const d = state.deposit;
  return {
    id: state.id,
    object: 'payout',
    customer: state.customerId,
    beneficiary: state.beneficiaryId,
    status: state.status,
    amount: state.amount,
    token: state.token.symbol,
    chain: state.token.chain,
    asset: state.token.asset,
    currency: state.currency,
    fiat_amount: state.fiatAmount,
    deposit_address: state.depositAddress,
    deposit: d
      ? {
          tx_hash: d.txHash,
          from: d.from,
          minted: d.minted === true,
          amount: d.amount,
          detected_at: d.detectedAt,
        }
      : null,
    forward_tx_hash: state.forwardTxHash,
    failure_reason: state.failureReason,
    refund: state.refund
      ? {
          to: state.refund.to,
          amount: state.refund.amount,
          tx_hash: state.refund.txHash,
          refunded_at: state.refund.refundedAt,
        }
      : null,
    refund_withheld: state.refundWithheld
      ? { reason: state.refundWithheld.reason, withheld_at: state.refundWithheld.withheldAt }
      : null,
    metadata: state.metadata,
    created_at: state.createdAt,
    updated_at: state.updatedAt,
  };
}

/** SPEC Payout events (beta): every transition is one webhook. */
export const PAYOUT_WEBHOOK_BY_EVENT: Readonly<Record<PayoutEvent['type'], string | null>> = {
  'PayoutCreated.v1': null,
  'PayoutDepositDetected.v1': 'payout.deposit_detected',
  'PayoutSweepSent.v1': null,
  'PayoutDepositSwept.v1': null,
  'PayoutDepositRetracted.v1': null,
  'PayoutSweepOrphaned.v1': null,
  'PayoutDepositReincluded.v1': null,
  'PayoutForwarded.v1': 'payout.forwarded',
  'PayoutCompleted.v1': 'payout.completed',
  'PayoutFailed.v1': 'payout.failed',
  'PayoutRefunded.v1': 'payout.refunded',
};
