import { TEST_DELIVERY_EVENT_TYPE } from './event-types';
import type { WebhookEventData, WebhookEventRecord } from './envelope';

const PLACEHOLDER_SUBSCRIPTION_ID = `0x${'0'.repeat(63)}1`;
const PLACEHOLDER_SUBSCRIBER = '0x000000000000000000000000000000000000dEaD';
const PLACEHOLDER_ASSET = 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';

/**
 * SPEC Events > test delivery: a `subscription.charge_succeeded` with placeholder data (zero-ish ids, a dead
 * address, the Base USDC asset), shaped as the real event: data.object is the subscription plus the deprecated
 * charge fields, data.charge is the charge. Amounts are integer strings.
 */
export function testDeliveryEvent(id: string, now: Date): WebhookEventRecord {
  const at = now.toISOString();
  const charge = {
    object: 'subscription_charge',
    id: 'subc_test_placeholder',
    subscription_id: PLACEHOLDER_SUBSCRIPTION_ID,
    subscriber: PLACEHOLDER_SUBSCRIBER,
    amount: '1000000',
    fee: '1200',
    tx_hash: `0x${'0'.repeat(64)}`,
    chain: 'eip155:8453',
    charge_nonce: 0,
    charged_at: at,
    block_number: '0',
    created_at: at,
    status: 'succeeded',
    failure_reason: null,
    fiat_amount: null,
    fiat_currency: null,
    settlement_status: null,
  };
  const subscription = {
    object: 'subscription',
    id: PLACEHOLDER_SUBSCRIPTION_ID,
    subscription_id: PLACEHOLDER_SUBSCRIPTION_ID,
    subscriber: PLACEHOLDER_SUBSCRIBER,
    external_customer_id: 'cus_test_placeholder',
    asset: PLACEHOLDER_ASSET,
    token_symbol: 'USDC',
    token_decimals: 6,
    chain: 'eip155:8453',
    cap_amount: '10000000',
    price: '1000000',
    price_currency: null,
    period_duration: 2_592_000,
    last_charged_at: at,
    next_charge_at: new Date(now.getTime() + 2_592_000_000).toISOString(),
    charge_nonce: 1,
    status: 'active',
    paused: false,
    flagged: false,
    budget: '10000000',
    spent_this_period: '1000000',
    remaining_budget: '9000000',
    created_at: at,
  };
  const data: WebhookEventData = {
    object: {
      ...subscription,
      amount: charge.amount,
      fee: charge.fee,
      subscription_charge_id: charge.id,
      tx_hash: charge.tx_hash,
      block_number: charge.block_number,
      charged_at: charge.charged_at,
    },
    charge,
  };
  return { id, type: TEST_DELIVERY_EVENT_TYPE, createdAt: now, data };
}
