import type { AuthenticatedMerchant } from '@stablepay/http';
import type { PaymentObject } from '@stablepay/payments-domain';
import type { SignedActionRequest } from './payment-actions.commands';

export type PaymentActionKind = 'capture' | 'refund' | 'rescue' | 'recover' | 'dispute_payer';

/**
 * An action's answer: the payment object once the action's facts are in its read model (read-your-writes).
 * `accepted`: the request is recorded but its effect waits (a recover of dust waits for the deposit's deploy): 202.
 */
export interface PaymentActionAnswer {
  readonly object: PaymentObject;
  readonly accepted: boolean;
}

/** What the payment action routes call (implemented by PaymentActionsGateway in @stablepay/payments-service). */
export interface PaymentActionsUseCases {
  act(
    kind: PaymentActionKind,
    merchant: AuthenticatedMerchant,
    paymentId: string,
    body: SignedActionRequest,
    idempotencyKey?: string,
  ): Promise<PaymentActionAnswer>;
}

export const PAYMENT_ACTIONS_USE_CASES = Symbol('PAYMENT_ACTIONS_USE_CASES');
