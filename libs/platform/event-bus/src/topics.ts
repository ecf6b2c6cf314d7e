/**
 * Stream category -> topic. One topic per aggregate type, `<service>.<aggregate>.v<N>`.
 * Adding an aggregate means adding its row here and its channel in docs/asyncapi.yaml.
 */
export const TOPIC_BY_CATEGORY: Readonly<Record<string, string>> = {
  merchant: 'merchants.merchant.v1',
  checkout: 'payments.checkout.v1',
  payment: 'payments.payment.v1',
  subscriptionCheckout: 'subscriptions.subscription-checkout.v1',
  subscription: 'subscriptions.subscription.v1',
  subscriptionManager: 'subscriptions.subscription-manager.v1',
  charge: 'ledger.charge.v1',
  customer: 'payouts.customer.v1',
  beneficiary: 'payouts.beneficiary.v1',
  payout: 'payouts.payout.v1',
  chain: 'indexer.chain-observation.v1',
  webhookEvent: 'webhooks.webhook-event.v1',
};

export function topicForCategory(category: string): string {
  const topic = TOPIC_BY_CATEGORY[category];
  if (!topic) throw new Error(`no topic is registered for stream category '${category}'`);
  return topic;
}

export function categoriesForTopics(topics: readonly string[]): string[] {
  const wanted = new Set(topics);
  const categories = Object.entries(TOPIC_BY_CATEGORY)
    .filter(([, topic]) => wanted.has(topic))
    .map(([category]) => category);
  const known = new Set(Object.values(TOPIC_BY_CATEGORY));
  for (const t of topics) if (!known.has(t)) throw new Error(`unknown topic '${t}'`);
  return categories;
}
