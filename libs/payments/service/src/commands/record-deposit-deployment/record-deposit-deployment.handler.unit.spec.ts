import { handleCommand } from '@stablepay/aggregate';
import { InMemoryEventStore } from '@stablepay/event-store';
import { paymentStreamId } from '@stablepay/payments-domain';
import { ManualClock } from '@stablepay/util';
import { PAYMENT_DECIDER, PaymentFacts } from '../payment-facts';
import { RecordDepositDeploymentHandler } from './record-deposit-deployment.handler';

const PAYMENT = 'pay_lost_then_mined';
const CHAIN = 'eip155:8453';
const USDC = '0x00000000000000000000000000000000000005dc';
const ASSET = `${CHAIN}/erc20:${USDC}`;
const PAYER = '0x0000000000000000000000000000000000000bee';
const SETTLEMENT = '0x0000000000000000000000000000000000005e77';
const DEPLOY = `0x${'d1'.repeat(32)}`;
const FUNDING = `0x${'f1'.repeat(32)}`;
/** The payer's funding transfer: the order in full. */
const transfer = {
  chain: CHAIN,
  txHash: FUNDING,
  blockNumber: '1',
  logIndex: 0,
  from: PAYER,
  asset: ASSET,
} as const;

/** A DIRECT payment paid in full, its payer screened clear: its deploy requested. */
async function paidPayment() {
  const events = new InMemoryEventStore();
  const clock = new ManualClock(new Date('2026-11-25T00:00:00Z'));
  const facts = new PaymentFacts(events, clock);
  const metadata = { metadata: { merchantId: 'mer_lost', mode: 'test' as const } };
  await handleCommand(
    events,
    paymentStreamId(PAYMENT),
    PAYMENT_DECIDER,
    {
      type: 'CreateCheckout',
      now: clock.now(),
      paymentId: PAYMENT,
      checkoutId: 'chk_lost',
      merchantId: 'mer_lost',
      onChainId: `0x${'cd'.repeat(32)}`,
      depositAddress: '0x00000000000000000000000000000000000d0a03',
      checkoutUrl: 'https://pay.example/c',
      input: { amount: '5000000', currency: 'USD', method: 'DIRECT' },
      context: {
        stablecoins: [{ asset: ASSET, chain: CHAIN, symbol: 'USDC', decimals: 6, pegCurrency: 'USD' }],
        settlementMode: 'crypto',
      },
    } as never,
    metadata,
  );
  await facts.append(
    PAYMENT,
    {
      type: 'ObserveTransfer',
      transfer: { ...transfer, amount: '5000000', listed: true },
      blockTime: clock.now(),
    },
    'seen',
  );
  await facts.append(
    PAYMENT,
    { type: 'ConfirmTransfer', chain: CHAIN, txHash: transfer.txHash, logIndex: 0 },
    'conf',
  );
  await facts.append(
    PAYMENT,
    { type: 'RecordScreening', result: { kind: 'clear', addresses: [PAYER] } },
    'clear',
  );
  return { events, facts, handler: new RecordDepositDeploymentHandler(facts) };
}

const deployed = {
  txHash: DEPLOY,
  chain: CHAIN,
  method: 'DIRECT' as const,
  payer: PAYER,
  payerFinalAt: new Date('2026-11-25T00:00:00Z'),
  amount: '5000000',
  settlementAddress: SETTLEMENT,
  authorizationExpiry: null,
};

describe('a deploy declared lost and then mined after all (its redeploy refused as already deployed, finding it)', () => {
  it('is recorded again: the payment settles once more instead of staying pending with its funds forwarded', async () => {
    const { events, facts, handler } = await paidPayment();
    expect((await handler.handle(PAYMENT, deployed)).newEvents.map((e) => e.type)).toContain(
      'PaymentSettled.v1',
    );
    // Redelivered before any loss: nothing twice.
    expect((await handler.handle(PAYMENT, deployed)).newEvents).toEqual([]);
    expect((await handler.lost(PAYMENT, DEPLOY)).newEvents.map((e) => e.type)).toEqual([
      'PaymentDeploymentLost.v1',
    ]);
    expect((await facts.load(PAYMENT)).state).toMatchObject({ phase: 'pending', deployment: null });

    const again = await handler.handle(PAYMENT, deployed);

    expect(again.newEvents.map((e) => e.type)).toContain('PaymentSettled.v1');
    expect(again.state).toMatchObject({ phase: 'settled', deployment: { txHash: DEPLOY, method: 'DIRECT' } });
    // The record after the loss is idempotent in its turn; the first record's key is unchanged.
    expect((await handler.handle(PAYMENT, deployed)).newEvents).toEqual([]);
    const types = (await events.readStream(paymentStreamId(PAYMENT))).map((e) => e.type);
    expect(types.filter((t) => t === 'PaymentSettled.v1')).toHaveLength(2);
  });

  it('lost a second time is undone again (its loss keyed after the first)', async () => {
    const { handler } = await paidPayment();
    await handler.handle(PAYMENT, deployed);
    await handler.lost(PAYMENT, DEPLOY);
    await handler.handle(PAYMENT, deployed);

    const lostAgain = await handler.lost(PAYMENT, DEPLOY);

    expect(lostAgain.newEvents.map((e) => e.type)).toEqual(['PaymentDeploymentLost.v1']);
    expect(lostAgain.state).toMatchObject({ phase: 'pending', deployment: null, deploymentsLost: 2 });
  });
});
