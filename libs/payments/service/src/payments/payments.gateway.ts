import { Inject, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { CLOCK } from '@stablepay/aggregate';
import { chainModeServed } from '@stablepay/chain-operator';
import { CommandClient } from '@stablepay/commands';
import { type AuthenticatedMerchant, type ListEnvelope, listEnvelope, type ListQuery } from '@stablepay/http';
import {
  type CancelCheckoutCommand,
  CHECKOUT_COMMANDS,
  type CheckoutCommandResult,
  type CheckoutListFilters,
  type CheckoutResource,
  type ConfigurePaymentCommand,
  type CreateCheckoutCommand,
  type HostedPaymentStatus,
  type HostedStatus,
  type PaymentListFilters,
  PAYMENT_REQUEST_COMMANDS,
  type PaymentRequestDetails,
  type PaymentRequestObject,
  type PaymentRequestStatus,
  type PaymentsUseCases,
  type SettlementExposureListFilters,
  type SettlementExposureListItem,
} from '@stablepay/payments-api';
import { type CreateCheckoutInput, dustThreshold, type PaymentObject } from '@stablepay/payments-domain';
import type { Clock } from '@stablepay/util';
import { PAYMENTS_CONFIG, type PaymentsConfig } from '../payments.config';
import { PaymentMerchantProfiles } from './merchant-profiles';
import { type CheckoutRow, type PaymentRow, PaymentReader } from './payment.reader';

/** A payment as the alternate payment-request surface shows it (same aggregate, its checkout's url). */
export function paymentRequestObject(
  checkout: CheckoutResource,
  payment: PaymentObject,
): PaymentRequestObject {
  const selected = checkout.accepted_assets.find((a) => a.asset === checkout.selected_asset) ?? null;
  return {
    object: 'payment_request',
    id: payment.id,
    checkout_id: checkout.id,
    url: checkout.checkout_url,
    status: payment.status,
    amount: payment.amount,
    currency: payment.currency,
    method: payment.method,
    // As the checkout shows it: withheld (with the reason) when this deployment cannot take the payment.
    deposit_address: checkout.deposit_address,
    unavailable_reason: checkout.unavailable_reason,
    accepted_assets: checkout.accepted_assets,
    chain: selected?.chain ?? null,
    token: selected?.token_symbol ?? null,
    token_amount: selected?.token_amount ?? null,
    amount_paid: payment.amount_paid,
    metadata: payment.metadata,
    expires_at: payment.expires_at,
    created_at: payment.created_at,
    updated_at: payment.updated_at,
  };
}

/**
 * What a payment of the other mode than the deployment's chains shows as `unavailable`: the statuses that ask the
 * customer to pay, to wait for a deploy the deposit worker holds, or promise late funds back by a recover the
 * payment actions refuse. Final states that say what happened (paid, cancelled, failed, refunded, flagged) stay.
 */
const UNAVAILABLE_WHEN_NOT_SERVED: ReadonlySet<HostedStatus> = new Set([
  'pending',
  'confirming',
  'expired',
  'recoverable',
]);

/**
 * What the hosted page says to the customer. `confirming`: money arrived and the payment is on its way (waiting
 * for confirmations, screening or the deploy); `paid`: the merchant has it (settled, in escrow). A pending payment
 * past expires_at with nothing that covers the order shows as expired before the timer records it. `modeServed`
 * false (the payment is of the other mode than the deployment's chains): `unavailable` instead of the above.
 */
export function hostedStatusOf(payment: PaymentObject, now: Date, modeServed = true): HostedStatus {
  const status = customerStatusOf(payment, now);
  return !modeServed && UNAVAILABLE_WHEN_NOT_SERVED.has(status) ? 'unavailable' : status;
}

function customerStatusOf(payment: PaymentObject, now: Date): HostedStatus {
  switch (payment.status) {
    case 'settled':
    case 'escrow_confirmed':
      return 'paid';
    case 'screening_pending':
      return 'confirming';
    case 'pending': {
      // Funds paying the order, by the share configure goes by: one unit anyone sent to the public address
      // told the customer "Payment received, confirming" before they paid.
      if (
        payment.token_amount !== null &&
        BigInt(payment.amount_paid) >= dustThreshold(BigInt(payment.token_amount))
      )
        return 'confirming';
      return now.getTime() >= Date.parse(payment.expires_at) ? 'expired' : 'pending';
    }
    default:
      return payment.status;
  }
}

/**
 * The gateway's side of the payments use cases (the port its controllers call): commands go to the payments
 * service, which owns the Payment aggregate, through the CommandClient; the answer's revision is awaited in the
 * read model (read-your-writes), which is also where every read comes from.
 */
@Injectable()
export class PaymentsGateway implements PaymentsUseCases {
  constructor(
    @Inject(CommandClient) private readonly commands: CommandClient,
    @Inject(PaymentReader) private readonly reader: PaymentReader,
    @Inject(PaymentMerchantProfiles) private readonly profiles: PaymentMerchantProfiles,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(PAYMENTS_CONFIG) private readonly config: Pick<PaymentsConfig, 'chainMode'>,
  ) {}

  async createCheckout(
    merchant: AuthenticatedMerchant,
    input: CreateCheckoutInput,
    origin: string,
    idempotencyKey?: string,
  ): Promise<CheckoutResource> {
    return this.present(await this.createCheckoutRow(merchant, input, origin, idempotencyKey));
  }

  /** The checkout of a merchant's API answer: its address withheld when this deployment cannot take the payment. */
  private present(row: CheckoutRow): CheckoutResource {
    const unavailable = this.unavailableReason(row);
    return {
      ...row.object,
      deposit_address: unavailable === null ? row.object.deposit_address : null,
      unavailable_reason: unavailable,
    };
  }

  /** Why this deployment cannot take a payment of the row's mode (its chains are of the other mode), else null. */
  private unavailableReason(row: { mode: CheckoutRow['mode'] }): CheckoutResource['unavailable_reason'] {
    return chainModeServed(this.config.chainMode, row.mode) ? null : 'chain_mode_mismatch';
  }

  private async createCheckoutRow(
    merchant: AuthenticatedMerchant,
    input: CreateCheckoutInput,
    origin: string,
    idempotencyKey?: string,
  ): Promise<CheckoutRow> {
    const command: CreateCheckoutCommand = {
      commandId: idempotencyKey ?? randomUUID(),
      merchant,
      input,
      origin,
    };
    const done = await this.commands.send<CheckoutCommandResult>(
      'payments',
      CHECKOUT_COMMANDS.create,
      command,
    );
    return this.reader.checkoutAtLeast(done.checkoutId, done.paymentId, done.revision);
  }

  async retrieveCheckout(merchant: AuthenticatedMerchant, id: string): Promise<CheckoutResource> {
    return this.present(await this.reader.getOwnedCheckout(merchant, id));
  }

  async listCheckouts(
    merchant: AuthenticatedMerchant,
    query: ListQuery,
    filters: CheckoutListFilters,
  ): Promise<ListEnvelope<CheckoutResource>> {
    const { rows, hasMore } = await this.reader.listCheckouts(merchant, query, filters);
    return listEnvelope(
      rows.map((r) => this.present(r)),
      hasMore,
    );
  }

  async cancelCheckout(
    merchant: AuthenticatedMerchant,
    id: string,
    commandId?: string,
  ): Promise<CheckoutResource> {
    const command: CancelCheckoutCommand = { commandId: commandId ?? randomUUID(), merchant, id };
    const done = await this.commands.send<CheckoutCommandResult>(
      'payments',
      CHECKOUT_COMMANDS.cancel,
      command,
    );
    return this.present(await this.reader.checkoutAtLeast(done.checkoutId, done.paymentId, done.revision));
  }

  async retrievePayment(merchant: AuthenticatedMerchant, paymentId: string): Promise<PaymentObject> {
    return (await this.reader.getOwnedPayment(merchant, paymentId)).object;
  }

  async listPayments(
    merchant: AuthenticatedMerchant,
    query: ListQuery,
    filters: PaymentListFilters,
  ): Promise<ListEnvelope<PaymentObject>> {
    const { rows, hasMore } = await this.reader.listPayments(merchant, query, filters);
    return listEnvelope(
      rows.map((r) => r.object),
      hasMore,
    );
  }

  async listSettlementExposures(
    query: ListQuery,
    filters: SettlementExposureListFilters,
  ): Promise<ListEnvelope<SettlementExposureListItem>> {
    const { rows, hasMore } = await this.reader.listSettlementExposures(query, filters);
    return listEnvelope(
      rows.map((r): SettlementExposureListItem => ({
        object: 'settlement_exposure',
        payment_id: r.id,
        merchant_id: r.merchant_id,
        mode: r.mode,
        amount: r.amount,
        currency: r.currency,
        reason: r.reason,
        recorded_at: r.recorded_at,
      })),
      hasMore,
    );
  }

  async createPaymentRequest(
    merchant: AuthenticatedMerchant,
    input: CreateCheckoutInput,
    origin: string,
    idempotencyKey?: string,
  ): Promise<PaymentRequestObject> {
    const checkout = await this.createCheckoutRow(merchant, input, origin, idempotencyKey);
    const { payment } = await this.ownedPair(merchant, checkout.object.payment_id);
    return paymentRequestObject(this.present(checkout), payment.object);
  }

  async retrievePaymentRequest(
    merchant: AuthenticatedMerchant,
    paymentId: string,
  ): Promise<PaymentRequestDetails> {
    const { payment, checkout } = await this.ownedPair(merchant, paymentId);
    return { ...paymentRequestObject(this.present(checkout), payment.object), payment: payment.object };
  }

  async configurePaymentRequest(
    merchant: AuthenticatedMerchant,
    paymentId: string,
    choice: { readonly chain: unknown; readonly token: unknown },
  ): Promise<PaymentRequestObject> {
    const command: ConfigurePaymentCommand = {
      commandId: randomUUID(),
      merchant,
      id: paymentId,
      chain: choice.chain,
      token: choice.token,
    };
    const done = await this.commands.send<CheckoutCommandResult>(
      'payments',
      PAYMENT_REQUEST_COMMANDS.configure,
      command,
    );
    const payment = await this.reader.paymentAtLeast(done.paymentId, done.revision);
    const checkout = await this.reader.checkoutAtLeast(done.checkoutId, done.paymentId, done.revision);
    return paymentRequestObject(this.present(checkout), payment.object);
  }

  async paymentRequestStatus(
    merchant: AuthenticatedMerchant,
    paymentId: string,
  ): Promise<PaymentRequestStatus> {
    const row = await this.reader.getOwnedPayment(merchant, paymentId);
    const p = row.object;
    return {
      object: 'payment_request_status',
      id: p.id,
      status: p.status,
      // A poller learns here, as the request's other answers say, that this payment cannot be paid on this deployment.
      unavailable_reason: this.unavailableReason(row),
      amount_paid: p.amount_paid,
      detected_asset: p.detected_asset,
      detected_chain: p.detected_chain,
      expires_at: p.expires_at,
      updated_at: p.updated_at,
    };
  }

  private async ownedPair(
    merchant: AuthenticatedMerchant,
    paymentId: string,
  ): Promise<{ payment: PaymentRow; checkout: CheckoutRow }> {
    const payment = await this.reader.getOwnedPayment(merchant, paymentId);
    const checkout = await this.reader.findCheckout(payment.checkout_id);
    if (!checkout)
      throw new Error(`checkout ${payment.checkout_id} of payment ${paymentId} is not projected`);
    return { payment, checkout };
  }

  async hostedStatus(checkoutId: string): Promise<HostedPaymentStatus | null> {
    const checkout = await this.reader.findCheckout(checkoutId);
    if (!checkout) return null;
    const payment = await this.reader.findPayment(checkout.payment_id);
    if (!payment) return null;
    const c = checkout.object;
    const p = payment.object;
    const profile = await this.profiles.get(checkout.merchant_id);
    // A payment of the other mode than this deployment's chains (recorded before such checkouts were refused):
    // what arrives at its deposit address is held, never deployed, so the page offers neither it nor its tokens.
    const served = chainModeServed(this.config.chainMode, checkout.mode);
    return {
      object: 'hosted_payment_status',
      checkout_id: c.id,
      payment_id: p.id,
      status: hostedStatusOf(p, this.clock.now(), served),
      payment_status: p.status,
      amount: c.amount,
      currency: c.currency,
      amount_paid: p.amount_paid,
      accepted_assets: served ? c.accepted_assets : [],
      deposit_address: served ? c.deposit_address : null,
      selected_asset: served ? c.selected_asset : null,
      detected_asset: p.detected_asset,
      detected_chain: p.detected_chain,
      expires_at: c.expires_at,
      success_url: c.success_url,
      cancel_url: c.cancel_url,
      business_name: profile.businessName,
      background_color: profile.backgroundColor,
      primary_color: profile.primaryColor,
    };
  }
}
