import {
  decidePayment,
  evolvePayment,
  initialPaymentState,
  type PaymentCommand,
  type PaymentEvent,
  type PaymentState,
} from '@stablepay/payments-domain';
import { paymentObjectsAsOf, paymentWebhook } from './payment-webhook';
import { hostedStatusOf } from './payments.gateway';

const T0 = new Date('2026-06-01T10:00:00.000Z');
const BASE = 'eip155:8453';
const USDC = `${BASE}/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913`;
const PAYER = '0x1111111111111111111111111111111111111111';
const OTHER = '0x2222222222222222222222222222222222222222';

/** Runs commands through the decider, keeping every fact (the stream). */
function stream(commands: PaymentCommand[]): PaymentEvent[] {
  let state: PaymentState = initialPaymentState();
  const events: PaymentEvent[] = [];
  for (const command of commands) {
    for (const event of decidePayment(command, state)) {
      events.push(event);
      state = evolvePayment(state, event);
    }
  }
  return events;
}

const create: PaymentCommand = {
  type: 'CreateCheckout',
  paymentId: 'pay_01',
  checkoutId: 'chk_01',
  merchantId: 'mer_01',
  onChainId: `0x${'ab'.repeat(32)}`,
  depositAddress: '0x5555555555555555555555555555555555555555',
  checkoutUrl: 'https://pay.example/pay/chk_01',
  input: { amount: '1000000', currency: 'USD' },
  context: {
    stablecoins: [{ asset: USDC, chain: BASE, symbol: 'USDC', decimals: 6, pegCurrency: 'USD' }],
    settlementMode: 'crypto',
  },
  now: T0,
};
const transfer = {
  txHash: `0x${'01'.repeat(32)}`,
  logIndex: 0,
  from: PAYER,
  asset: USDC,
  chain: BASE,
  amount: '1000000',
  blockNumber: '7',
};

/** An outflow recorded from its deposit log (by the action's receipt or the deposit worker). */
const outflow = (
  kind: 'captured' | 'refunded' | 'recovered' | 'rescued',
  txHash: string,
  asset: string,
  amount: string,
  to: string,
): PaymentCommand => ({ type: 'RecordOutflow', kind, txHash, asset, amount, to, now: T0 });

/** The webhook of the first `type` fact of `events`, mapped from the stream up to it. */
function webhookOf(events: PaymentEvent[], type: string) {
  const index = events.findIndex((e) => e.type === type);
  if (index < 0) throw new Error(`no ${type} in the stream`);
  return paymentWebhook(events[index] as PaymentEvent, events.slice(0, index + 1));
}

describe('payment webhooks and the hosted status', () => {
  const events = stream([
    create,
    { type: 'ObserveTransfer', transfer, blockTime: T0, now: T0 },
    { type: 'ConfirmTransfer', chain: BASE, txHash: transfer.txHash, logIndex: 0, now: T0 },
  ]);

  it('maps each fact to its webhook with the payment object as of that fact', () => {
    const confirmedAt = events.findIndex((e) => e.type === 'PaymentDepositConfirmed.v1');
    const history = events.slice(0, confirmedAt + 1);
    const hook = paymentWebhook(events[confirmedAt] as PaymentEvent, history);
    expect(hook?.type).toBe('payment.deposit_confirmed');
    expect(hook?.data.object).toMatchObject({ id: 'pay_01', amount_paid: '1000000', detected_asset: USDC });
    expect(paymentWebhook(events[0] as PaymentEvent, events.slice(0, 1))).toBeNull();
    expect(() => paymentWebhook(events[confirmedAt] as PaymentEvent, events.slice(0, 1))).toThrow(
      /must end with that event/,
    );
  });

  it('shows the customer pending, then confirming once a funding transfer arrived, and expired when due', () => {
    const created = paymentObjectsAsOf(events.slice(0, 1)).payment;
    expect(hostedStatusOf(created, T0)).toBe('pending');
    expect(hostedStatusOf(created, new Date('2026-06-01T11:00:00.000Z'))).toBe('expired');
    expect(hostedStatusOf(paymentObjectsAsOf(events.slice(0, 2)).payment, T0)).toBe('confirming');
    expect(hostedStatusOf({ ...created, status: 'escrow_confirmed' }, T0)).toBe('paid');
    expect(hostedStatusOf({ ...created, status: 'flagged' }, T0)).toBe('flagged');
  });

  it('shows the customer pending, not confirming, while only dust arrived (one unit anyone can send)', () => {
    const dust = { ...transfer, txHash: `0x${'03'.repeat(32)}`, from: OTHER, amount: '1' };
    const dusted = stream([create, { type: 'ObserveTransfer', transfer: dust, blockTime: T0, now: T0 }]);
    const object = paymentObjectsAsOf(dusted).payment;
    expect(object.transactions[0]).toMatchObject({ is_funding: true });
    expect(hostedStatusOf(object, T0)).toBe('pending');
    // A payer's partial payment (1% of the order and more) is shown arrived.
    const partial = { ...dust, txHash: `0x${'04'.repeat(32)}`, from: PAYER, amount: '10000' };
    const paidPart = stream([create, { type: 'ObserveTransfer', transfer: partial, blockTime: T0, now: T0 }]);
    expect(hostedStatusOf(paymentObjectsAsOf(paidPart).payment, T0)).toBe('confirming');
  });

  it("shows a payment of the other mode than the deployment's chains as unavailable while it asks to pay, wait or be returned", () => {
    const created = paymentObjectsAsOf(events.slice(0, 1)).payment;
    expect(hostedStatusOf(created, T0, false)).toBe('unavailable');
    expect(hostedStatusOf(created, new Date('2026-06-01T11:00:00.000Z'), false)).toBe('unavailable');
    expect(hostedStatusOf(paymentObjectsAsOf(events.slice(0, 2)).payment, T0, false)).toBe('unavailable');
    expect(hostedStatusOf({ ...created, status: 'recoverable' }, T0, false)).toBe('unavailable');
    // What already happened is still said as it is.
    expect(hostedStatusOf({ ...created, status: 'settled' }, T0, false)).toBe('paid');
    expect(hostedStatusOf({ ...created, status: 'cancelled' }, T0, false)).toBe('cancelled');
    expect(hostedStatusOf({ ...created, status: 'flagged' }, T0, false)).toBe('flagged');
  });

  it('a recover and a rescue notify the merchant with what left the deposit as data.transfer once the transaction has the chain confirmations, not when recorded from its receipt', () => {
    const over = { ...transfer, txHash: `0x${'02'.repeat(32)}`, amount: '1500000' };
    const other = `${BASE}/erc20:0x4200000000000000000000000000000000000042`;
    const destination = '0x4444444444444444444444444444444444444444';
    const outflows = stream([
      create,
      { type: 'ObserveTransfer', transfer: over, blockTime: T0, now: T0 },
      { type: 'ConfirmTransfer', chain: BASE, txHash: over.txHash, logIndex: 0, now: T0 },
      { type: 'RecordScreening', result: { kind: 'clear', addresses: [PAYER] }, now: T0 },
      {
        type: 'RecordDeployed',
        method: 'DIRECT',
        txHash: '0xdeploy',
        chain: BASE,
        payer: PAYER,
        payerFinalAt: T0,
        amount: '1000000',
        settlementAddress: destination,
        now: T0,
      },
      outflow('recovered', '0xrec', USDC, '500000', PAYER),
      outflow('rescued', '0xres', other, '7', destination),
      { type: 'ConfirmOutflow', txHash: '0xrec', now: T0 },
      { type: 'ConfirmOutflow', txHash: '0xres', now: T0 },
    ]);
    const hookOf = (type: string) => webhookOf(outflows, type);
    expect(hookOf('PaymentRecoverable.v1')?.data).not.toHaveProperty('transfer');
    // Recorded at one confirmation, where a reorg can still take the transaction back: nothing said yet.
    expect(hookOf('PaymentRecovered.v1')).toBeNull();
    expect(hookOf('PaymentRescued.v1')).toBeNull();
    const recovered = hookOf('PaymentRecoveryConfirmed.v1');
    expect(recovered?.type).toBe('payment.recovered');
    expect(recovered?.data.transfer).toEqual({
      tx_hash: '0xrec',
      asset: USDC,
      token_symbol: 'USDC',
      chain: BASE,
      amount: '500000',
      to: PAYER,
    });
    expect(recovered?.data.object).toMatchObject({ status: 'settled' });
    expect(recovered?.data.object).not.toHaveProperty('recoverable_amount');
    const rescued = hookOf('PaymentRescueConfirmed.v1');
    expect(rescued?.type).toBe('payment.rescued');
    expect(rescued?.data.transfer).toEqual({
      tx_hash: '0xres',
      asset: other,
      token_symbol: null,
      chain: BASE,
      amount: '7',
      to: destination,
    });
  });

  it('a capture and a refund notify the merchant (payment.settled, payment.refunded) once the transaction has the chain confirmations, not when recorded from its receipt', () => {
    const settlement = '0x4444444444444444444444444444444444444444';
    const escrow = stream([
      { ...create, input: { ...create.input, method: 'TWO_STEP' } } as PaymentCommand,
      { type: 'ObserveTransfer', transfer, blockTime: T0, now: T0 },
      { type: 'ConfirmTransfer', chain: BASE, txHash: transfer.txHash, logIndex: 0, now: T0 },
      { type: 'RecordScreening', result: { kind: 'clear', addresses: [PAYER] }, now: T0 },
      {
        type: 'RecordDeployed',
        method: 'TWO_STEP',
        txHash: '0xdeploy',
        chain: BASE,
        payer: PAYER,
        payerFinalAt: T0,
        amount: '1000000',
        authorizationExpiry: new Date(T0.getTime() + 86_400_000),
        now: T0,
      },
      outflow('captured', '0xcap', USDC, '600000', settlement),
      outflow('refunded', '0xref', USDC, '400000', PAYER),
      { type: 'ConfirmOutflow', txHash: '0xcap', now: T0 },
      { type: 'ConfirmOutflow', txHash: '0xref', now: T0 },
    ]);
    const hookOf = (type: string) => webhookOf(escrow, type);
    // Recorded at one confirmation, where a reorg can still take the transaction back: nothing said yet.
    expect(hookOf('PaymentCaptured.v1')).toBeNull();
    expect(hookOf('PaymentRefunded.v1')).toBeNull();
    const settled = hookOf('PaymentCaptureConfirmed.v1');
    expect(settled?.type).toBe('payment.settled');
    expect(settled?.data).not.toHaveProperty('transfer');
    expect(settled?.data.object).toMatchObject({ status: 'settled', amount_captured: '600000' });
    const refunded = hookOf('PaymentRefundConfirmed.v1');
    expect(refunded?.type).toBe('payment.refunded');
    expect(refunded?.data.object).toMatchObject({ amount_captured: '600000', amount_refunded: '400000' });
  });

  it('a fact of a type this release does not know leaves the objects as the known facts make them', () => {
    const unknown = { type: 'PaymentSomethingNew.v9', data: {} };
    expect(paymentObjectsAsOf([...events, unknown])).toEqual(paymentObjectsAsOf(events));
  });
});
