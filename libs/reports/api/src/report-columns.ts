import type { CsvColumn } from '@stablepay/http';
import type { PaymentObject } from '@stablepay/payments-domain';
import type { SubscriptionObject } from '@stablepay/subscriptions-domain';
import type { ChargeReportRow } from './reports.port';

/** Payment `amount` is the order value with 6 implied decimals (SPEC Conventions), whatever the currency. */
export const PAYMENT_AMOUNT_DECIMALS = 6;

/**
 * The token's decimals from the two exact forms of one amount the payment object holds (`token_amount`, smallest
 * units, and `token_amount_decimal`, the same amount written with its point and no trailing zeros): the digits of the
 * decimal form followed by as many zeros as are missing spell the integer, so decimals = fraction digits + those
 * zeros. Null when there is no detected token or the amount is zero (nothing to tell the decimals by).
 */
export function tokenDecimalsOf(
  tokenAmount: string | null,
  tokenAmountDecimal: string | null,
): number | null {
  if (tokenAmount === null || tokenAmountDecimal === null || !/^[0-9]+$/.test(tokenAmount)) return null;
  const [whole = '', fraction = ''] = tokenAmountDecimal.split('.');
  const digits = `${whole}${fraction}`.replace(/^0+/, '');
  const integer = tokenAmount.replace(/^0+/, '');
  if (digits === '' || !integer.startsWith(digits) || !/^0*$/.test(integer.slice(digits.length))) return null;
  return fraction.length + (integer.length - digits.length);
}

const funding = (p: PaymentObject) => p.transactions.filter((t) => t.is_funding);
const nonFunding = (p: PaymentObject) => p.transactions.filter((t) => !t.is_funding);

/**
 * Amounts of several tokens in one cell: `<CAIP-19>=<smallest units>`, space-separated, in the order the payment
 * first saw each token. Recover returns one token but rescue and the transfers that fund nothing can be any.
 */
export function assetAmountsCell(amounts: ReadonlyArray<{ asset: string; amount: string }>): string {
  const sums = new Map<string, bigint>();
  for (const { asset, amount } of amounts) sums.set(asset, (sums.get(asset) ?? 0n) + BigInt(amount));
  return [...sums].map(([asset, amount]) => `${asset}=${amount}`).join(' ');
}

/**
 * GET /reports/payments/export columns (docs/openapi.yaml `PaymentsExportCsv`, docs/reports.md). Amounts are integer
 * strings; `amount` has `amount_decimals` (6) implied decimals in `currency`; the token amounts are smallest units of
 * `token_symbol` with `token_decimals`. Lists inside a cell are separated by a space.
 */
export const PAYMENT_COLUMNS: readonly CsvColumn<PaymentObject>[] = [
  { header: 'id', cell: (p) => p.id },
  { header: 'created_at', cell: (p) => p.created_at },
  { header: 'updated_at', cell: (p) => p.updated_at },
  { header: 'status', cell: (p) => p.status },
  { header: 'method', cell: (p) => p.method },
  { header: 'checkout_id', cell: (p) => p.checkout_id },
  { header: 'currency', cell: (p) => p.currency },
  { header: 'amount', cell: (p) => p.amount },
  { header: 'amount_decimals', cell: () => PAYMENT_AMOUNT_DECIMALS },
  { header: 'detected_chain', cell: (p) => p.detected_chain },
  { header: 'detected_asset', cell: (p) => p.detected_asset },
  { header: 'token_symbol', cell: (p) => p.detected_token_symbol },
  { header: 'token_decimals', cell: (p) => tokenDecimalsOf(p.token_amount, p.token_amount_decimal) },
  { header: 'token_amount', cell: (p) => p.token_amount },
  { header: 'amount_paid', cell: (p) => p.amount_paid },
  { header: 'amount_captured', cell: (p) => p.amount_captured },
  { header: 'amount_refunded', cell: (p) => p.amount_refunded },
  { header: 'deposit_address', cell: (p) => p.deposit_address },
  { header: 'payer_addresses', cell: (p) => p.payer_addresses.join(' ') },
  {
    header: 'funding_tx_hashes',
    cell: (p) =>
      funding(p)
        .map((t) => t.tx_hash)
        .join(' '),
  },
  { header: 'deploy_tx_hash', cell: (p) => p.deploy_tx_hash },
  { header: 'settlement_status', cell: (p) => p.settlement_status },
  { header: 'settlement_failure_reason', cell: (p) => p.settlement_failure_reason },
  { header: 'failure_reason', cell: (p) => p.failure_reason },
  { header: 'failure_message', cell: (p) => p.failure_message },
  { header: 'recoverable_reason', cell: (p) => p.recoverable_reason },
  { header: 'recoverable_amount', cell: (p) => p.recoverable_amount },
  { header: 'expires_at', cell: (p) => p.expires_at },
  { header: 'metadata', cell: (p) => JSON.stringify(p.metadata), untrusted: true },
  // Last, so the columns before keep the positions earlier exports have them at (exports get appended).
  { header: 'recoverable_asset', cell: (p) => p.recoverable_asset },
  { header: 'recoverable_chain', cell: (p) => p.recoverable_chain },
  // Appended likewise: the deposit's flows besides the order's, so its on-chain history reconciles with the row.
  { header: 'amount_recovered', cell: (p) => assetAmountsCell(p.recovered_amounts ?? []) },
  { header: 'amount_rescued', cell: (p) => assetAmountsCell(p.rescued_amounts ?? []) },
  { header: 'amount_non_funding', cell: (p) => assetAmountsCell(nonFunding(p)) },
  {
    header: 'non_funding_tx_hashes',
    cell: (p) =>
      nonFunding(p)
        .map((t) => t.tx_hash)
        .join(' '),
  },
];

/** GET /reports/subscriptions/export columns: the subscription object, window fields at the chain's time. */
export const SUBSCRIPTION_COLUMNS: readonly CsvColumn<SubscriptionObject>[] = [
  { header: 'id', cell: (s) => s.id },
  { header: 'created_at', cell: (s) => s.created_at },
  { header: 'status', cell: (s) => s.status },
  { header: 'paused', cell: (s) => s.paused },
  { header: 'flagged', cell: (s) => s.flagged },
  { header: 'chain', cell: (s) => s.chain },
  { header: 'asset', cell: (s) => s.asset },
  { header: 'token_symbol', cell: (s) => s.token_symbol },
  { header: 'token_decimals', cell: (s) => s.token_decimals },
  { header: 'subscriber', cell: (s) => s.subscriber },
  { header: 'external_customer_id', cell: (s) => s.external_customer_id, untrusted: true },
  { header: 'price', cell: (s) => s.price },
  { header: 'price_currency', cell: (s) => s.price_currency },
  { header: 'cap_amount', cell: (s) => s.cap_amount },
  { header: 'budget', cell: (s) => s.budget },
  { header: 'spent_this_period', cell: (s) => s.spent_this_period },
  { header: 'remaining_budget', cell: (s) => s.remaining_budget },
  { header: 'period_duration', cell: (s) => s.period_duration },
  { header: 'charge_nonce', cell: (s) => s.charge_nonce },
  { header: 'last_charged_at', cell: (s) => s.last_charged_at },
  { header: 'next_charge_at', cell: (s) => s.next_charge_at },
];

/** GET /reports/subscription-charges/export columns: the ledger's charge plus its subscription's token. */
export const SUBSCRIPTION_CHARGE_COLUMNS: readonly CsvColumn<ChargeReportRow>[] = [
  { header: 'id', cell: (r) => r.charge.id },
  { header: 'created_at', cell: (r) => r.charge.created_at },
  { header: 'charged_at', cell: (r) => r.charge.charged_at },
  { header: 'status', cell: (r) => r.charge.status },
  { header: 'subscription_id', cell: (r) => r.charge.subscription_id },
  { header: 'subscriber', cell: (r) => r.charge.subscriber },
  { header: 'chain', cell: (r) => r.charge.chain },
  { header: 'asset', cell: (r) => r.asset },
  { header: 'token_symbol', cell: (r) => r.token_symbol },
  { header: 'token_decimals', cell: (r) => r.token_decimals },
  { header: 'amount', cell: (r) => r.charge.amount },
  { header: 'fee', cell: (r) => r.charge.fee },
  { header: 'charge_nonce', cell: (r) => r.charge.charge_nonce },
  { header: 'tx_hash', cell: (r) => r.charge.tx_hash },
  { header: 'block_number', cell: (r) => r.charge.block_number },
  { header: 'failure_reason', cell: (r) => r.charge.failure_reason },
  { header: 'fiat_amount', cell: (r) => r.charge.fiat_amount },
  { header: 'fiat_currency', cell: (r) => r.charge.fiat_currency },
  { header: 'settlement_status', cell: (r) => r.charge.settlement_status },
];
