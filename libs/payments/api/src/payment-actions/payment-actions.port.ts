import type { AuthenticatedMerchant } from '@stablepay/http';
import type { PaymentObject } from '@stablepay/payments-domain';
import type { SignedActionRequest } from './payment-actions.commands';

export type PaymentActionKind = 'capture' | 'refund' | 'rescue' | 'recover';

/** What the payment action routes call (implemented by PaymentActionsGateway in @stablepay/payments-service). */
export interface PaymentActionsUseCases {
  /** Answers the payment object once the action's facts are in its read model (read-your-writes). */
  act(
    kind: PaymentActionKind,
    merchant: AuthenticatedMerchant,
    paymentId: string,
    body: SignedActionRequest,
    idempotencyKey?: string,
  ): Promise<PaymentObject>;
}

export const PAYMENT_ACTIONS_USE_CASES = Symbol('PAYMENT_ACTIONS_USE_CASES');
