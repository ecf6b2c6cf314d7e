import { createHash } from 'node:crypto';
import type { BankAccount, PayoutFailureReason } from '@stablepay/payouts-domain';

export interface OffRampTransferRequest {
  readonly payoutId: string;
  readonly chain: string;
  readonly token: string;
  readonly tokenDecimals: number;
  /** Token minor units forwarded. */
  readonly amount: string;
  readonly currency: string;
  readonly beneficiary: { readonly holderName: string; readonly account: BankAccount };
}

export type OffRampTransferStatus =
  | { readonly state: 'pending' }
  | { readonly state: 'completed'; readonly fiatAmount: string }
  | { readonly state: 'failed'; readonly reason: PayoutFailureReason };

/**
 * Port: the fiat off-ramp. `submit` hands it the forwarded crypto and the bank details (idempotent per payout);
 * `status` reports the transfer; `refund` returns a failed payout's crypto to the wallet it came from. Real
 * providers plug in here; their asynchronous reports are polled by the payout flow (docs/payouts.md).
 */
export interface OffRampProvider {
  submit(request: OffRampTransferRequest): Promise<{ readonly transferId: string }>;
  /** `request`: what was submitted (a provider that keeps it needs only the id). */
  status(transferId: string, request: OffRampTransferRequest): Promise<OffRampTransferStatus>;
  refund(request: {
    readonly payoutId: string;
    readonly to: string;
    readonly amount: string;
  }): Promise<{ readonly reference: string }>;
}

export const OFF_RAMP_PROVIDER = Symbol('OFF_RAMP_PROVIDER');

/** Sandbox rates: fiat minor units per 1 USD-pegged token (docs/payouts.md). */
const SANDBOX_RATES: Readonly<Record<string, bigint>> = { USD: 100n, EUR: 92n };

/**
 * The sandbox off-ramp (docs/payouts.md, "Sandbox magic values"): every transfer settles at once at the sandbox
 * rate, except for beneficiaries whose account number (or IBAN) ends in
 * - `0002`: the bank transfer fails -> `rampoff_withdraw_failed` (then refunded);
 * - `0003`: the provider rejects the payout for compliance -> `provider_rejected` (then refunded);
 * and amounts whose last four digits are `0666` (in token minor units): the sell order fails ->
 * `rampoff_order_failed` (then refunded).
 */
export class SandboxOffRamp implements OffRampProvider {
  async submit(request: OffRampTransferRequest): Promise<{ transferId: string }> {
    return {
      transferId: `tr_sandbox_${createHash('sha256').update(request.payoutId).digest('hex').slice(0, 24)}`,
    };
  }

  /** Decided from the request alone, so a restart between submit and status changes nothing. */
  async status(_transferId: string, request: OffRampTransferRequest): Promise<OffRampTransferStatus> {
    const account = request.beneficiary.account;
    const last4 = (account.kind === 'iban' ? account.iban : account.accountNumber).slice(-4);
    if (last4 === '0002') return { state: 'failed', reason: 'rampoff_withdraw_failed' };
    if (last4 === '0003') return { state: 'failed', reason: 'provider_rejected' };
    if (request.amount.endsWith('0666')) return { state: 'failed', reason: 'rampoff_order_failed' };
    const rate = SANDBOX_RATES[request.currency] ?? 100n;
    const fiat = (BigInt(request.amount) * rate) / 10n ** BigInt(request.tokenDecimals);
    return { state: 'completed', fiatAmount: fiat.toString() };
  }

  async refund(request: { payoutId: string; to: string; amount: string }): Promise<{ reference: string }> {
    return {
      reference: `rf_sandbox_${createHash('sha256').update(request.payoutId).digest('hex').slice(0, 24)}`,
    };
  }
}
