import {
  type CreateSubscriptionCheckoutInput,
  decideSubscriptionCheckout,
  foldSubscriptionCheckout,
  type SubscriptionCheckoutEvent,
} from '@stablepay/subscriptions-domain';

/** Shared given-state of the checkout tests (not exported by the library): an intent created by `Acme` on Base. */
export function createdCheckoutEvents(
  id: string,
  onchainId: string,
  input: CreateSubscriptionCheckoutInput,
  now: Date,
): SubscriptionCheckoutEvent[] {
  return decideSubscriptionCheckout(
    {
      type: 'CreateSubscriptionCheckout',
      id,
      onchainId,
      businessName: 'Acme',
      checkoutUrl: `https://pay.example/subscribe/${id}`,
      input,
      context: {
        availableChains: [{ caip2: 'eip155:8453', tokenSymbols: ['USDC'] }],
        quotedTokenSymbols: ['USDC'],
        settlement: { mode: 'crypto' },
      },
      now,
    },
    foldSubscriptionCheckout([]),
  );
}
