import { DomainError } from '@stablepay/util';
import {
  type CreateCheckoutInput,
  type MerchantChainStatus,
  type PaymentCommand,
  type PaymentState,
  addressesToScreen,
  dustRecoveryPending,
  decidePayment,
  escrowRemaining,
  heldBalance,
  paymentAsset,
  evolvePayment,
  initialPaymentState,
  paymentSettlementCheckAt,
} from './payment';
import {
  PAYMENT_WEBHOOK_BY_EVENT,
  PAYMENT_WEBHOOK_TYPES,
  type ObservedTransfer,
  type PaymentEvent,
  type SettlementReportKind,
  paymentWebhookType,
} from './payment.events';
import { toCheckoutObject, toPaymentObject } from './payment-object';
import type { SupportedStablecoin } from './rules';

const T0 = new Date('2026-06-01T10:00:00.000Z');
const at = (minutes: number) => new Date(T0.getTime() + minutes * 60_000);
const BASE = 'eip155:8453';
const ETH = 'eip155:1';
const POLYGON = 'eip155:137';
const USDC_BASE = `${BASE}/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913`;
const USDT_BASE = `${BASE}/erc20:0xfde4C96c8593536E31F229EA8f37b2ADa2699bb2`;
const USDC_ETH = `${ETH}/erc20:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48`;
const DAI_ETH = `${ETH}/erc20:0x6B175474E89094C44Da98b954EedeAC495271d0F`;
const OTHER_BASE = `${BASE}/erc20:0x4200000000000000000000000000000000000042`;
const USDC_POLYGON = `${POLYGON}/erc20:0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359`;
const PAYER = '0x1111111111111111111111111111111111111111';
const SECOND_WALLET = '0x2222222222222222222222222222222222222222';
const SETTLEMENT = '0x3333333333333333333333333333333333333333';
const MERCHANT_CHOSEN = '0x4444444444444444444444444444444444444444';

const STABLECOINS: SupportedStablecoin[] = [
  { asset: USDC_BASE, chain: BASE, symbol: 'USDC', decimals: 6, pegCurrency: 'USD' },
  { asset: USDT_BASE, chain: BASE, symbol: 'USDT', decimals: 6, pegCurrency: 'USD' },
  { asset: USDC_ETH, chain: ETH, symbol: 'USDC', decimals: 6, pegCurrency: 'USD' },
  { asset: DAI_ETH, chain: ETH, symbol: 'DAI', decimals: 18, pegCurrency: 'USD' },
];

/** 12.50 USD: 12500000 in 6-decimal order units; 12500000 USDC units; 12.5e18 DAI units. */
const ORDER = '12500000';

const create = (
  input: CreateCheckoutInput = {},
  settlementMode: 'crypto' | 'fiat' = 'crypto',
): PaymentCommand => ({
  type: 'CreateCheckout',
  paymentId: 'pay_01',
  checkoutId: 'chk_01',
  merchantId: 'mer_01',
  onChainId: `0x${'ab'.repeat(32)}`,
  depositAddress: '0x5555555555555555555555555555555555555555',
  checkoutUrl: 'https://pay.example/checkout/chk_01',
  input: { amount: ORDER, currency: 'USD', ...input },
  context: { stablecoins: STABLECOINS, settlementMode },
  now: T0,
});

let txCounter = 0;
const transfer = (over: Partial<ObservedTransfer> = {}): ObservedTransfer => ({
  txHash: `0x${(++txCounter).toString(16).padStart(64, '0')}`,
  logIndex: 0,
  from: PAYER,
  asset: USDC_BASE,
  chain: BASE,
  amount: ORDER,
  blockNumber: '100',
  listed: true,
  ...over,
});

const observe = (t: ObservedTransfer, minutes = 1): PaymentCommand => ({
  type: 'ObserveTransfer',
  transfer: t,
  blockTime: at(minutes),
  now: at(minutes),
});
const confirm = (t: ObservedTransfer, minutes = 2): PaymentCommand => ({
  type: 'ConfirmTransfer',
  chain: t.chain,
  txHash: t.txHash,
  logIndex: t.logIndex,
  now: at(minutes),
});
const clear = (minutes = 3, addresses = [PAYER]): PaymentCommand => ({
  type: 'RecordScreening',
  result: { kind: 'clear', addresses },
  now: at(minutes),
});
const deployDirect = (amount = ORDER, minutes = 4): PaymentCommand => ({
  type: 'RecordDeployed',
  method: 'DIRECT',
  txHash: '0xdeploy',
  chain: BASE,
  payer: PAYER,
  payerFinalAt: at(minutes + 24 * 60),
  amount,
  settlementAddress: SETTLEMENT,
  now: at(minutes),
});
const deployTwoStep = (amount = ORDER, minutes = 4): PaymentCommand => ({
  type: 'RecordDeployed',
  method: 'TWO_STEP',
  txHash: '0xdeploy',
  chain: BASE,
  payer: PAYER,
  payerFinalAt: at(minutes + 24 * 60),
  amount,
  authorizationExpiry: at(minutes + 7 * 24 * 60),
  now: at(minutes),
});
const deployNone = (minutes: number): PaymentCommand => ({
  type: 'RecordDeployed',
  method: 'NONE',
  txHash: '0xdeploy',
  chain: BASE,
  payer: PAYER,
  payerFinalAt: at(minutes + 24 * 60),
  now: at(minutes),
});

/** given a history of commands (each decided on the state so far), when a command, then events or an error. */
function given(...commands: PaymentCommand[]) {
  let state: PaymentState = initialPaymentState();
  const history: PaymentEvent[] = [];
  for (const c of commands) {
    const events = decidePayment(c, state);
    history.push(...events);
    for (const e of events) state = evolvePayment(state, e);
  }
  return {
    state,
    history,
    when(command: PaymentCommand) {
      const events = decidePayment(command, state);
      const after = events.reduce(evolvePayment, state);
      return { events, types: events.map((e) => e.type), state: after, object: toPaymentObject(after) };
    },
    whenRejected(command: PaymentCommand): DomainError {
      try {
        decidePayment(command, state);
      } catch (error) {
        if (error instanceof DomainError) return error;
        throw error;
      }
      throw new Error('expected the command to be refused');
    },
  };
}

/** An abandoned partial deposit (5 USDC), deployed NONE and recovered to its payer in `0xrec` a day later. */
function abandonedThenRecovered(): PaymentCommand[] {
  const partial = transfer({ amount: '5000000' });
  return [
    create(),
    observe(partial),
    confirm(partial),
    { type: 'Expire', now: at(61) },
    clear(62),
    deployNone(62),
    {
      type: 'RecordOutflow',
      kind: 'recovered',
      txHash: '0xrec',
      asset: USDC_BASE,
      amount: '5000000',
      to: PAYER,
      now: at(63 + 24 * 60),
    },
  ];
}

const paid = (t = transfer()) => [create(), observe(t), confirm(t), clear()] as const;

/** The indexer's retraction of `t` (a reorg took its block). */
const retract = (t: ObservedTransfer, minutes = 9): PaymentCommand => ({
  type: 'RetractTransfer',
  chain: t.chain,
  txHash: t.txHash,
  logIndex: t.logIndex,
  now: at(minutes),
});

describe('Payment: create (POST /checkouts)', () => {
  it('records the checkout with the order amount as a 6-decimal integer and each accepted token amount', () => {
    const { events, object } = given().when(
      create({ metadata: { order: '42' }, success_url: 'https://shop.example/ok' }),
    );
    expect(events).toHaveLength(1);
    const created = events[0];
    if (created?.type !== 'PaymentCreated.v1') throw new Error('expected PaymentCreated.v1');
    expect(created.data.acceptedAssets.map((a) => [a.asset, a.tokenAmount])).toEqual([
      [USDC_BASE, '12500000'],
      [USDT_BASE, '12500000'],
      [USDC_ETH, '12500000'],
      [DAI_ETH, '12500000000000000000'],
    ]);
    expect(created.data.expiresAt).toBe(at(60).toISOString());
    expect(object).toMatchObject({
      id: 'pay_01',
      object: 'payment',
      status: 'pending',
      method: 'DIRECT',
      amount: ORDER,
      amount_paid: '0',
      currency: 'USD',
      detected_asset: null,
      deploy_tx_hash: null,
      payer_addresses: [],
      transactions: [],
      non_funding_transactions_count: 0,
      metadata: { order: '42' },
    });
  });

  it('narrows the accepted assets to accepted_chains x accepted_tokens', () => {
    const { events } = given().when(create({ accepted_chains: [ETH], accepted_tokens: ['dai'] }));
    const created = events[0];
    if (created?.type !== 'PaymentCreated.v1') throw new Error('expected PaymentCreated.v1');
    expect(created.data.acceptedAssets.map((a) => a.asset)).toEqual([DAI_ETH]);
  });

  it.each<[string, CreateCheckoutInput, string, string?]>([
    ['amount missing', { amount: undefined }, 'amount'],
    ['amount with a decimal point', { amount: '12.50' }, 'amount'],
    ['amount as a number', { amount: 12500000 }, 'amount'],
    ['amount with a leading zero', { amount: '012' }, 'amount'],
    ['amount zero', { amount: '0' }, 'amount'],
    ['amount of 25 digits', { amount: '1'.repeat(25) }, 'amount'],
    ['currency missing', { currency: undefined }, 'currency'],
    ['currency not ISO-4217 shaped', { currency: 'US$' }, 'currency'],
    ['currency of three letters that is no ISO-4217 currency', { currency: 'XYZ' }, 'currency'],
    ['currency of a withdrawn ISO-4217 code', { currency: 'DEM' }, 'currency'],
    ['currency of a unit of account, not money', { currency: 'XDR' }, 'currency'],
    ['unknown method', { method: 'ESCROW' }, 'method'],
    ['authorization_period on DIRECT', { authorization_period: 7200 }, 'authorization_period'],
    [
      'authorization_period below one hour',
      { method: 'TWO_STEP', authorization_period: 60 },
      'authorization_period',
    ],
    [
      'authorization_period above 30 days',
      { method: 'TWO_STEP', authorization_period: 31 * 86400 },
      'authorization_period',
    ],
    ['expires_in below 5 minutes', { expires_in: 60 }, 'expires_in'],
    ['expires_in above 24 hours', { expires_in: 86401 }, 'expires_in'],
    ['expires_in not an integer', { expires_in: 600.5 }, 'expires_in'],
    ['accepted_chains not CAIP-2', { accepted_chains: ['base'] }, 'accepted_chains', 'invalid_caip2'],
    [
      'accepted_chains unsupported',
      { accepted_chains: ['eip155:999'] },
      'accepted_chains',
      'unsupported_chain',
    ],
    ['accepted_chains empty', { accepted_chains: [] }, 'accepted_chains'],
    ['accepted_chains duplicated', { accepted_chains: [BASE, BASE] }, 'accepted_chains', 'duplicate_value'],
    ['accepted_tokens unsupported', { accepted_tokens: ['EURC'] }, 'accepted_tokens', 'unsupported_token'],
    [
      'no accepted token on the chains',
      { accepted_chains: [BASE], accepted_tokens: ['DAI'] },
      'accepted_tokens',
      'no_accepted_asset',
    ],
    ['metadata an array', { metadata: ['x'] }, 'metadata'],
    ['metadata value too long', { metadata: { note: 'x'.repeat(501) } }, 'metadata[note]'],
    ['metadata value not a string', { metadata: { n: 1 } }, 'metadata[n]'],
    ['success_url not a URL', { success_url: 'shop/ok' }, 'success_url'],
    ['cancel_url with credentials', { cancel_url: 'https://u:p@shop.example' }, 'cancel_url'],
    ['cancel_url not http(s)', { cancel_url: 'javascript:alert(1)' }, 'cancel_url'],
  ])('refuses %s with a validation error naming the param', (_name, input, param, ...rest) => {
    const code = rest[0];
    const error = given().whenRejected(create(input));
    expect(error).toMatchObject({ type: 'validation_error', status: 400, param });
    if (code) expect(error.code).toBe(code);
  });

  it('refuses a currency no supported stablecoin is pegged to (422 currency_not_supported)', () => {
    expect(given().whenRejected(create({ currency: 'eur' }))).toMatchObject({
      status: 422,
      code: 'currency_not_supported',
      param: 'currency',
    });
  });

  it('refuses a second create of the same checkout', () => {
    expect(given(create()).whenRejected(create())).toMatchObject({ status: 409, code: 'checkout_exists' });
  });
});

describe('Payment: transfers observed to the deposit address', () => {
  it('the first funding transfer fixes detected_asset and detected_chain; amount_paid counts it before confirmation', () => {
    const t = transfer();
    const { types, object } = given(create()).when(observe(t));
    expect(types).toEqual(['PaymentTransferObserved.v1']);
    expect(object).toMatchObject({
      status: 'pending',
      amount_paid: ORDER,
      detected_asset: USDC_BASE,
      detected_token_symbol: 'USDC',
      detected_chain: BASE,
      token_amount: '12500000',
      token_amount_decimal: '12.5',
      payer_addresses: [PAYER],
      non_funding_transactions_count: 0,
    });
    expect(object.transactions).toEqual([
      {
        tx_hash: t.txHash,
        log_index: 0,
        from: PAYER,
        minted: false,
        amount: ORDER,
        asset: USDC_BASE,
        token_symbol: 'USDC',
        chain: BASE,
        block_number: '100',
        is_funding: true,
        non_funding_reason: null,
        confirmed: false,
      },
    ]);
  });

  it('an 18-decimal stablecoin pays the order in 10^12 times as many units', () => {
    const t = transfer({ asset: DAI_ETH, chain: ETH, amount: '12500000000000000000' });
    const { object, types } = given(create(), observe(t)).when(confirm(t));
    expect(types).toEqual(['PaymentTransferConfirmed.v1', 'PaymentDepositConfirmed.v1']);
    expect(object).toMatchObject({
      detected_asset: DAI_ETH,
      token_amount: '12500000000000000000',
      token_amount_decimal: '12.5',
    });
  });

  it('the same log delivered twice is recorded once', () => {
    const t = transfer();
    expect(given(create(), observe(t)).when(observe(t)).events).toEqual([]);
  });

  it('is_funding false: wrong token, wrong chain, another token than the one that paid the order; counted in non_funding_transactions_count', () => {
    const first = transfer({ amount: '1000000' });
    const { object } = given(
      create(),
      observe(transfer({ asset: OTHER_BASE })),
      observe(transfer({ asset: USDC_POLYGON, chain: POLYGON })),
      observe(first),
      observe(transfer({ asset: USDT_BASE })),
      observe(transfer({ asset: USDC_ETH, chain: ETH })),
    ).when({ type: 'Expire', now: at(1) });
    // USDT paid the order: the partial USDC sent first is another token's.
    expect(object.transactions.map((t) => [t.is_funding, t.non_funding_reason])).toEqual([
      [false, 'wrong_token'],
      [false, 'wrong_chain'],
      [false, 'wrong_token'],
      [true, null],
      [false, 'wrong_chain'],
    ]);
    expect(object.non_funding_transactions_count).toBe(4);
    expect(object.amount_paid).toBe(ORDER);
    expect(object.detected_asset).toBe(USDT_BASE);
  });

  it('a second full payment after the order was paid is a duplicate (non-funding), later recoverable as over_deposit', () => {
    const t1 = transfer();
    const t2 = transfer();
    const { object } = given(create(), observe(t1), observe(t2)).when(confirm(t1));
    expect(object.transactions.map((t) => t.non_funding_reason)).toEqual([null, 'duplicate']);
    expect(object.non_funding_transactions_count).toBe(1);
  });

  it('a transfer after settlement is a post-settle straggler: non-funding, recoverable to the payer once its sender is screened', () => {
    const straggler = transfer({ amount: '500000', from: SECOND_WALLET });
    const g = given(...paid(), deployDirect(), observe(straggler, 10));
    const confirmed = g.when(confirm(straggler, 11));
    expect(g.state.transfers.at(-1)?.nonFundingReason).toBe('straggler');
    expect(confirmed.types).toEqual(['PaymentTransferConfirmed.v1']);
    expect(addressesToScreen(confirmed.state)).toEqual([SECOND_WALLET]);
    const { types, object } = given(
      ...paid(),
      deployDirect(),
      observe(straggler, 10),
      confirm(straggler, 11),
    ).when(clear(12, [SECOND_WALLET]));
    expect(types).toEqual(['PaymentPayerCleared.v1', 'PaymentRecoverable.v1']);
    expect(object).toMatchObject({
      status: 'recoverable',
      recoverable_reason: 'over_deposit',
      recovery_destination: PAYER,
      recoverable_amount: '500000',
      non_funding_transactions_count: 1,
    });
  });
});

describe('Payment: deposit_confirmed, deploy, settled, escrow_confirmed', () => {
  it('deposit_confirmed comes when confirmed funding reaches the token amount, before any deploy', () => {
    const t = transfer();
    const { types } = given(create(), observe(t)).when(confirm(t));
    expect(types).toEqual(['PaymentTransferConfirmed.v1', 'PaymentDepositConfirmed.v1']);
  });

  it('the payer is screened before the deploy is requested, with the order amount of the detected token', () => {
    const t = transfer();
    const g = given(create(), observe(t), confirm(t));
    expect(addressesToScreen(g.state)).toEqual([PAYER.toLowerCase()]);
    const { events } = g.when(clear());
    expect(events.map((e) => e.type)).toEqual(['PaymentPayerCleared.v1', 'PaymentDeployRequested.v1']);
    expect(events[1]?.data).toMatchObject({
      method: 'DIRECT',
      chain: BASE,
      asset: USDC_BASE,
      payer: PAYER,
      amount: ORDER,
    });
  });

  it('DIRECT: deployed -> settled with deploy_tx_hash', () => {
    const { types, object } = given(...paid()).when(deployDirect());
    expect(types).toEqual(['PaymentSettled.v1']);
    expect(object).toMatchObject({ status: 'settled', deploy_tx_hash: '0xdeploy' });
  });

  const confirmDeploy = (minutes = 6, txHash = '0xdeploy'): PaymentCommand => ({
    type: 'ConfirmDeployment',
    txHash,
    now: at(minutes),
  });

  it.each([
    ['DIRECT', 'payment.settled', deployDirect],
    ['TWO_STEP', 'payment.escrow_confirmed', deployTwoStep],
  ] as const)(
    '%s: the deploy recorded from its receipt announces nothing; ConfirmDeployment at the chain confirmations sends %s, once',
    (method, webhook, deploy) => {
      const t = transfer();
      const history = [create({ method }), observe(t), confirm(t), clear(), deploy()];
      const g = given(...history);
      // Recorded at one confirmation, where a shallow reorg can still take the deploy (and the forward) back.
      expect(g.history.map(paymentWebhookType).filter((h) => h !== null)).toEqual([
        'payment.deposit_confirmed',
      ]);
      const confirmed = g.when(confirmDeploy());
      expect(confirmed.events).toEqual([
        {
          type: 'PaymentDeploymentConfirmed.v1',
          data: { deployTxHash: '0xdeploy', method, reachedConfirmationsAt: at(6).toISOString() },
        },
      ]);
      expect(confirmed.events.map(paymentWebhookType)).toEqual([webhook]);
      // Not a change of the payment: updated_at stays the deploy's.
      expect(confirmed.object.updated_at).toBe(g.when(confirmDeploy()).object.updated_at);
      expect(confirmed.object.updated_at).toBe(at(4).toISOString());
      const after = given(...history, confirmDeploy());
      expect(after.when(confirmDeploy(7)).events).toEqual([]);
    },
  );

  it.each([
    ['DIRECT', 'payment.settled', deployDirect],
    ['TWO_STEP', 'payment.escrow_confirmed', deployTwoStep],
  ] as const)(
    '%s deployed before the upgrade (no announcedAtConfirmations): its fact still reads as %s and the confirmation announces nothing again',
    (method, webhook, deploy) => {
      const t = transfer();
      const recorded = given(create({ method }), observe(t), confirm(t), clear(), deploy()).history;
      expect(recorded.at(-1)?.data).toMatchObject({ announcedAtConfirmations: true });
      // The stream as the version before wrote it (announced from the deployment fact itself).
      const legacy = recorded.map((e) => {
        if (e.type !== 'PaymentSettled.v1' && e.type !== 'PaymentEscrowFunded.v1') return e;
        const { announcedAtConfirmations: _, ...data } = e.data;
        return { ...e, data } as PaymentEvent;
      });
      expect(legacy.map(paymentWebhookType).filter((h) => h !== null)).toEqual([
        'payment.deposit_confirmed',
        webhook,
      ]);
      const state = legacy.reduce(evolvePayment, initialPaymentState());
      // The worker's check of a deploy received on the bus across the upgrade: no second webhook.
      expect(decidePayment(confirmDeploy(), state)).toEqual([]);
    },
  );

  it('ConfirmDeployment of another transaction, of a NONE deployment or before any deployment records nothing', () => {
    expect(given(...paid()).when(confirmDeploy()).events).toEqual([]);
    expect(given(...paid(), deployDirect()).when(confirmDeploy(6, '0xother')).events).toEqual([]);
    const none = given(...abandonedThenRecovered().slice(0, 6));
    expect(none.state.deployment?.method).toBe('NONE');
    expect(none.when(confirmDeploy(64)).events).toEqual([]);
  });

  it('TWO_STEP: deployed -> escrow_confirmed (payment.escrow_confirmed) with its authorization expiry', () => {
    const t = transfer();
    const { types, object } = given(create({ method: 'TWO_STEP' }), observe(t), confirm(t), clear()).when(
      deployTwoStep(),
    );
    expect(types).toEqual(['PaymentEscrowFunded.v1']);
    expect(object).toMatchObject({
      status: 'escrow_confirmed',
      authorization_expires_at: at(4 + 7 * 24 * 60).toISOString(),
    });
  });

  it('the webhook order is deposit_confirmed, then settled', () => {
    const g = given(...paid(), deployDirect(), {
      type: 'ConfirmDeployment',
      txHash: '0xdeploy',
      now: at(6),
    });
    const hooks = g.history.map(paymentWebhookType).filter((h) => h !== null);
    expect(hooks).toEqual(['payment.deposit_confirmed', 'payment.settled']);
  });

  it('a deployment recorded twice is recorded once', () => {
    expect(given(...paid(), deployDirect()).when(deployDirect()).events).toEqual([]);
  });
});

describe('Payment: a deploy a reorg took back before its confirmations while the funding stands', () => {
  const lost = (minutes = 5, deployTxHash = '0xdeploy'): PaymentCommand => ({
    type: 'RecordDeploymentLost',
    deployTxHash,
    now: at(minutes),
  });
  const redeployed = (deploy: PaymentCommand): PaymentCommand =>
    ({
      ...deploy,
      txHash: '0xredeploy',
      now: at(6),
    }) as PaymentCommand;

  it.each([
    ['DIRECT', deployDirect, 'settled', 'PaymentSettled.v1'],
    ['TWO_STEP', deployTwoStep, 'escrow_confirmed', 'PaymentEscrowFunded.v1'],
  ] as const)(
    '%s: the deployment and what it moved are undone (pending again, nothing announced), and the deploy recorded again is a new one',
    (method, deploy, phase, fact) => {
      const t = transfer();
      const before = given(create({ method }), observe(t), confirm(t), clear());
      const deployed = given(create({ method }), observe(t), confirm(t), clear(), deploy());
      expect(deployed.state.phase).toBe(phase);
      const undone = deployed.when(lost());
      expect(undone.events).toEqual([
        {
          type: 'PaymentDeploymentLost.v1',
          data: { deployTxHash: '0xdeploy', chain: BASE, at: at(5).toISOString() },
        },
      ]);
      // Nothing to tell the merchant: payment.settled / escrow_confirmed waits for the confirmations.
      expect(undone.events.map(paymentWebhookType)).toEqual([null]);
      // The API object as before the deploy was recorded (its time aside), the deploy still requested.
      const { updated_at: _u, ...after } = undone.object;
      const { updated_at: _b, ...earlier } = toPaymentObject(before.state);
      expect(after).toEqual(earlier);
      expect(undone.state).toMatchObject({
        phase: 'pending',
        deployRequested: true,
        deployMethod: method,
        deployment: null,
        escrowFunded: 0n,
        forwarded: 0n,
        outflowTxs: [],
      });
      const again = given(create({ method }), observe(t), confirm(t), clear(), deploy(), lost()).when(
        redeployed(deploy()),
      );
      expect(again.types).toEqual([fact]);
      expect(again.object).toMatchObject({ status: phase, deploy_tx_hash: '0xredeploy' });
      expect(again.state.outflows[USDC_BASE]).toBe(method === 'DIRECT' ? BigInt(ORDER) : 0n);
    },
  );

  it('recorded once: the same loss again, another transaction, a confirmed deploy or one an outflow followed records nothing', () => {
    const history = [...paid(), deployDirect()] as const;
    expect(given(...history, lost()).when(lost(6)).events).toEqual([]);
    expect(given(...history).when(lost(5, '0xother')).events).toEqual([]);
    const confirmed: PaymentCommand = { type: 'ConfirmDeployment', txHash: '0xdeploy', now: at(5) };
    expect(given(...history, confirmed).when(lost(6)).events).toEqual([]);
    // A capture recorded after the escrow deploy: undone first by its own receipt's check.
    const t = transfer();
    const captured: PaymentCommand = {
      type: 'RecordOutflow',
      kind: 'captured',
      amount: '1000000',
      txHash: '0xpartial',
      to: SETTLEMENT,
      asset: USDC_BASE,
      now: at(5),
    };
    const escrow = [
      create({ method: 'TWO_STEP' }),
      observe(t),
      confirm(t),
      clear(),
      deployTwoStep(),
    ] as const;
    expect(given(...escrow, captured).when(lost(6)).events).toEqual([]);
  });

  it('a fiat-settled DIRECT deploy: its payout, unreported, is dropped and opened again at the next settle; one the provider reported on is kept', () => {
    const t = transfer();
    const settled = [create({}, 'fiat'), observe(t), confirm(t), clear(), deployDirect()] as const;
    const undone = given(...settled, lost());
    expect(undone.state.settlement).toBeNull();
    expect(paymentSettlementCheckAt(undone.state)).toBeNull();
    const again = given(...settled, lost(), redeployed(deployDirect()));
    expect(again.state.settlement).toMatchObject({ status: 'pending', startedAt: at(6).toISOString() });
    const reported: PaymentCommand = {
      type: 'RecordSettlementReport',
      reportId: 'r-1',
      kind: 'deposit_credited',
      reportedAt: at(5),
      now: at(5),
    };
    expect(given(...settled, reported).when(lost(6)).events).toEqual([]);
  });
});

describe('Payment: the cases peers keep reporting', () => {
  it('a wallet that deducts its fee underpays: stays pending, amount_paid below the token amount, visible', () => {
    const t = transfer({ amount: '12400000' });
    const { types, object } = given(create(), observe(t)).when(confirm(t));
    expect(types).toEqual(['PaymentTransferConfirmed.v1']);
    expect(object).toMatchObject({ status: 'pending', amount_paid: '12400000', token_amount: ORDER });
  });

  it('a top-up before expiry adds up: two funding transfers -> deposit_confirmed -> settled', () => {
    const short = transfer({ amount: '12400000' });
    const topUp = transfer({ amount: '100000', from: SECOND_WALLET });
    const g = given(create(), observe(short), confirm(short), observe(topUp, 10));
    const confirmed = g.when(confirm(topUp, 11));
    expect(confirmed.types).toEqual(['PaymentTransferConfirmed.v1', 'PaymentDepositConfirmed.v1']);
    const s = given(
      create(),
      observe(short),
      confirm(short),
      observe(topUp, 10),
      confirm(topUp, 11),
      clear(12, [PAYER, SECOND_WALLET]),
    );
    expect(s.history.at(-1)).toMatchObject({ type: 'PaymentDeployRequested.v1', data: { payer: PAYER } });
    const { object } = s.when(deployDirect(ORDER, 13));
    expect(object).toMatchObject({
      status: 'settled',
      amount_paid: ORDER,
      payer_addresses: [PAYER, SECOND_WALLET],
    });
    expect(object.transactions.every((t) => t.is_funding)).toBe(true);
  });

  describe('tokens minted straight to the deposit (a bridge relayer sent the minting transaction)', () => {
    const RELAYER = '0x6666666666666666666666666666666666666666';

    it('the deploy names no payer from the minting transaction: it asks for the settlement address instead (payerUnknown)', () => {
      const minted = transfer({ from: RELAYER, minted: true });
      const g = given(create({ method: 'TWO_STEP' }), observe(minted), confirm(minted));
      const screened = g.when(clear(3, [RELAYER]));
      expect(screened.events.find((e) => e.type === 'PaymentDeployRequested.v1')).toMatchObject({
        data: { method: 'TWO_STEP', payer: RELAYER, payerUnknown: true },
      });
      expect(screened.object.transactions).toEqual([
        expect.objectContaining({ from: RELAYER, minted: true, is_funding: true }),
      ]);
    });

    it('an abandoned minted deposit is announced with no recovery_destination until the deploy attests one, then names it', () => {
      const minted = transfer({ from: RELAYER, minted: true, amount: '5000000' });
      const g = given(create(), observe(minted), confirm(minted));
      const expired = g.when({ type: 'Expire', now: at(61) });
      expect(expired.events.find((e) => e.type === 'PaymentRecoverable.v1')).toMatchObject({
        data: { destination: RELAYER, payerUnknown: true },
      });
      expect(expired.object).toMatchObject({ status: 'recoverable', recovery_destination: null });
      const deployed = given(
        create(),
        observe(minted),
        confirm(minted),
        { type: 'Expire', now: at(61) },
        clear(62, [RELAYER]),
      ).when({ ...deployNone(63), payer: SETTLEMENT } as PaymentCommand);
      expect(deployed.events.find((e) => e.type === 'PaymentRecoverable.v1')).toMatchObject({
        data: { destination: SETTLEMENT },
      });
      expect(deployed.object).toMatchObject({ recovery_destination: SETTLEMENT });
    });

    it('a payer who sent its own transfer stays the payer beside a smaller minted one', () => {
      const own = transfer({ amount: '12000000' });
      const minted = transfer({ from: RELAYER, minted: true, amount: '500000' });
      const g = given(create(), observe(own), observe(minted), confirm(own), confirm(minted));
      const screened = g.when(clear(3, [PAYER, RELAYER]));
      const requested = screened.events.find((e) => e.type === 'PaymentDeployRequested.v1');
      expect(requested).toMatchObject({ data: { payer: PAYER } });
      expect(requested?.data).not.toHaveProperty('payerUnknown');
    });

    it('a transfer recorded before the minted field (an old event) keeps its sender as the payer', () => {
      const old = transfer({ from: RELAYER });
      const screened = given(create(), observe(old), confirm(old)).when(clear(3, [RELAYER]));
      const requested = screened.events.find((e) => e.type === 'PaymentDeployRequested.v1');
      expect(requested).toMatchObject({ data: { payer: RELAYER } });
      expect(requested?.data).not.toHaveProperty('payerUnknown');
    });
  });

  it('every sender is screened: a top-up from a second wallet holds the deploy until that wallet is clear', () => {
    const short = transfer({ amount: '12400000' });
    const topUp = transfer({ amount: '100000', from: SECOND_WALLET });
    const g = given(
      create(),
      observe(short),
      confirm(short),
      observe(topUp),
      confirm(topUp),
      clear(3, [PAYER]),
    );
    expect(g.history.some((e) => e.type === 'PaymentDeployRequested.v1')).toBe(false);
    expect(addressesToScreen(g.state)).toEqual([SECOND_WALLET.toLowerCase()]);
  });

  it('a transfer after expiry is recoverable to its sender (abandoned), after a NONE deployment', () => {
    const late = transfer({ from: SECOND_WALLET });
    const g = given(create(), { type: 'Expire', now: at(61) }, observe(late, 70));
    expect(g.state.transfers[0]?.nonFundingReason).toBe('straggler');
    const confirmed = g.when(confirm(late, 71));
    expect(confirmed.types).toEqual(['PaymentTransferConfirmed.v1', 'PaymentRecoverable.v1']);
    expect(confirmed.object).toMatchObject({
      status: 'recoverable',
      recoverable_reason: 'abandoned',
      recovery_destination: SECOND_WALLET,
      recoverable_amount: ORDER,
    });
    const screened = given(
      create(),
      { type: 'Expire', now: at(61) },
      observe(late, 70),
      confirm(late, 71),
    ).when(clear(72, [SECOND_WALLET]));
    expect(screened.events[1]).toMatchObject({
      type: 'PaymentDeployRequested.v1',
      data: { method: 'NONE', payer: SECOND_WALLET, amount: '0' },
    });
  });

  it('an expired checkout that received only a token it did not accept: recoverable to its sender (abandoned), after a NONE deployment in that token', () => {
    const wrong = transfer({ asset: USDT_BASE, amount: '3000000', from: SECOND_WALLET });
    const g = given(create({ accepted_tokens: ['USDC'] }), observe(wrong, 5), confirm(wrong, 6));
    expect(g.state.transfers[0]?.nonFundingReason).toBe('wrong_token');
    const expired = g.when({ type: 'Expire', now: at(61) });
    expect(expired.types).toEqual(['PaymentExpired.v1', 'PaymentRecoverable.v1']);
    expect(expired.object).toMatchObject({
      status: 'recoverable',
      recoverable_reason: 'abandoned',
      recovery_destination: SECOND_WALLET,
      recoverable_amount: '3000000',
    });
    const screened = given(create({ accepted_tokens: ['USDC'] }), observe(wrong, 5), confirm(wrong, 6), {
      type: 'Expire',
      now: at(61),
    }).when(clear(62, [SECOND_WALLET]));
    expect(screened.events[1]).toMatchObject({
      type: 'PaymentDeployRequested.v1',
      data: { method: 'NONE', chain: BASE, asset: USDT_BASE, payer: SECOND_WALLET, amount: '0' },
    });
    // Still pending, it is only a wrong-token transfer: nothing is announced or deployed before the expiry.
    expect(g.state.recoverable).toBeNull();
    expect(g.history.some((e) => e.type === 'PaymentDeployRequested.v1')).toBe(false);
  });

  it("an expired checkout that received only a token the deployment does not list (anyone's contract logging a Transfer): no payment token, nothing announced or deployed, and a later stablecoin is the payer's to recover", () => {
    const junk = transfer({
      asset: `${BASE}/erc20:0x00000000000000000000000000000000000bad01`,
      amount: '1000000000',
      from: SECOND_WALLET,
      listed: false,
    });
    const g = given(create({ accepted_tokens: ['USDC'] }), observe(junk, 5), confirm(junk, 6));
    const expired = g.when({ type: 'Expire', now: at(61) });
    expect(expired.types).toEqual(['PaymentExpired.v1']);
    expect(paymentAsset(expired.state)).toBeNull();
    expect(expired.object).toMatchObject({ status: 'expired' });
    expect(expired.object?.recoverable_amount ?? null).toBeNull();
    // A transfer recorded before `listed` existed counts as not listed.
    const { listed: _dropped, ...legacy } = junk;
    expect(
      paymentAsset(
        given(create({ accepted_tokens: ['USDC'] }), observe(legacy, 5), { type: 'Expire', now: at(61) })
          .state,
      ),
    ).toBeNull();
    const late = transfer({ amount: '2000000', from: PAYER });
    const recovered = given(
      create({ accepted_tokens: ['USDC'] }),
      observe(junk, 5),
      confirm(junk, 6),
      { type: 'Expire', now: at(61) },
      observe(late, 70),
    ).when(confirm(late, 71));
    expect(recovered.object).toMatchObject({
      status: 'recoverable',
      recoverable_reason: 'abandoned',
      recovery_destination: PAYER,
      recoverable_asset: USDC_BASE,
      recoverable_amount: '2000000',
    });
  });

  it('a recoverable amount names its token and chain, also when nothing was detected in time (late transfer, cancelled checkout, only a token it did not accept)', () => {
    const late = transfer({ from: SECOND_WALLET });
    const afterExpiry = given(create(), { type: 'Expire', now: at(61) }, observe(late, 70)).when(
      confirm(late, 71),
    ).object;
    const afterCancel = given(create(), { type: 'Cancel', now: at(5) }, observe(late, 6)).when(
      confirm(late, 7),
    ).object;
    const wrong = transfer({ asset: USDT_BASE, amount: '3000000', from: SECOND_WALLET });
    const wrongOnly = given(create({ accepted_tokens: ['USDC'] }), observe(wrong, 5), confirm(wrong, 6)).when(
      {
        type: 'Expire',
        now: at(61),
      },
    ).object;
    for (const [object, asset, amount] of [
      [afterExpiry, USDC_BASE, ORDER],
      [afterCancel, USDC_BASE, ORDER],
      [wrongOnly, USDT_BASE, '3000000'],
    ] as const) {
      // SPEC's detected_* stay the token the customer paid the order with: none here.
      expect(object).toMatchObject({ status: 'recoverable', detected_asset: null, detected_chain: null });
      expect(object).toMatchObject({
        recoverable_amount: amount,
        recoverable_asset: asset,
        recoverable_chain: BASE,
      });
    }
    const over = transfer({ amount: '15000000' });
    const overDeposit = given(create(), observe(over), confirm(over), clear()).when(deployDirect()).object;
    expect(overDeposit).toMatchObject({
      recoverable_reason: 'over_deposit',
      detected_asset: USDC_BASE,
      recoverable_asset: USDC_BASE,
      recoverable_chain: BASE,
    });
  });

  describe('the payment token of an abandoned deposit stays the one first named (announced, then bound on chain)', () => {
    const wrong = transfer({ asset: USDT_BASE, amount: '3000000', from: SECOND_WALLET });
    const lateUsdc = transfer({ amount: ORDER, from: PAYER });
    const wrongOnlyExpired = [
      create({ accepted_tokens: ['USDC'] }),
      observe(wrong, 5),
      confirm(wrong, 6),
      { type: 'Expire', now: at(61) },
    ] as const;
    const noneDeployedTo = (payer: string, minutes: number): PaymentCommand => ({
      type: 'RecordDeployed',
      method: 'NONE',
      txHash: '0xdeploy',
      chain: BASE,
      payer,
      payerFinalAt: at(minutes + 24 * 60),
      now: at(minutes),
    });
    const usdtRecoverableToItsSender = {
      status: 'recoverable',
      recoverable_reason: 'abandoned',
      recovery_destination: SECOND_WALLET,
      recoverable_amount: '3000000',
      recoverable_asset: USDT_BASE,
    };

    it('an accepted token after the NONE deploy was requested in the one it did not accept: a straggler, the first stays recoverable to its sender, the late one is rescued', () => {
      const g = given(...wrongOnlyExpired, clear(62, [SECOND_WALLET]), observe(lateUsdc, 70));
      expect(g.history.find((e) => e.type === 'PaymentDeployRequested.v1')).toMatchObject({
        data: { method: 'NONE', asset: USDT_BASE },
      });
      expect(g.state.transfers[1]?.nonFundingReason).toBe('straggler');
      const confirmed = g.when(confirm(lateUsdc, 71));
      // No notice replaces the USDT one: the 3 USDT stay the payer's.
      expect(confirmed.types).toEqual(['PaymentTransferConfirmed.v1']);
      expect(confirmed.object).toMatchObject(usdtRecoverableToItsSender);
      expect(paymentAsset(confirmed.state)).toBe(USDT_BASE);

      const deployed = given(
        ...wrongOnlyExpired,
        clear(62, [SECOND_WALLET]),
        observe(lateUsdc, 70),
        confirm(lateUsdc, 71),
        noneDeployedTo(SECOND_WALLET, 72),
        // Deployed, the late token's sender is screened before anything moves its funds.
        clear(72, [PAYER]),
      );
      expect(toPaymentObject(deployed.state)).toMatchObject(usdtRecoverableToItsSender);
      // The contract refuses to rescue its bound token (PayerOwnedToken); so does the API.
      expect(
        deployed.whenRejected({
          type: 'RequestRescue',
          asset: USDT_BASE,
          to: MERCHANT_CHOSEN,
          amount: '3000000',
          now: at(73),
        }),
      ).toMatchObject({ code: 'payer_owned_token', param: 'asset' });
      // The late token is not the bound one: only a merchant-signed rescue moves it (to its sender, if the
      // merchant so chooses).
      expect(
        deployed.when({ type: 'RequestRescue', asset: USDC_BASE, to: PAYER, amount: ORDER, now: at(73) })
          .events[0],
      ).toMatchObject({
        type: 'PaymentRescueRequested.v1',
        data: { asset: USDC_BASE, to: PAYER, amount: ORDER },
      });
      expect(deployed.when({ type: 'RequestRecover', now: at(72 + 24 * 60) }).events[0]).toMatchObject({
        type: 'PaymentRecoverRequested.v1',
        data: { asset: USDT_BASE, destination: SECOND_WALLET },
      });
    });

    it('an accepted token after the notice but before the deploy (screening pending): the announced token is the one deployed, its sender the one screened', () => {
      const g = given(...wrongOnlyExpired, observe(lateUsdc, 70), confirm(lateUsdc, 71));
      expect(g.history.filter((e) => e.type === 'PaymentRecoverable.v1')).toHaveLength(1);
      expect(toPaymentObject(g.state)).toMatchObject(usdtRecoverableToItsSender);
      expect(addressesToScreen(g.state)).toEqual([SECOND_WALLET]);
      const screened = g.when(clear(72, [SECOND_WALLET]));
      expect(screened.events.find((e) => e.type === 'PaymentDeployRequested.v1')).toMatchObject({
        data: { method: 'NONE', asset: USDT_BASE, payer: SECOND_WALLET },
      });
    });

    it('the announced token lost to a reorg before any deploy pins nothing: the accepted token that is held becomes the payment token and is announced', () => {
      const g = given(...wrongOnlyExpired, observe(lateUsdc, 70), confirm(lateUsdc, 71), {
        type: 'RetractTransfer',
        chain: BASE,
        txHash: wrong.txHash,
        logIndex: 0,
        now: at(72),
      });
      expect(paymentAsset(g.state)).toBe(USDC_BASE);
      expect(g.history.at(-1)).toMatchObject({
        type: 'PaymentRecoverable.v1',
        data: { asset: USDC_BASE, destination: PAYER, amount: ORDER },
      });
    });

    it("a stream that recorded the late token's notice before the pin (1877ecf) is read with the bound token, and its next command announces that one again", () => {
      const g = given(
        ...wrongOnlyExpired,
        clear(62, [SECOND_WALLET]),
        observe(lateUsdc, 70),
        confirm(lateUsdc, 71),
        noneDeployedTo(SECOND_WALLET, 72),
      );
      const recorded: PaymentEvent = {
        type: 'PaymentRecoverable.v1',
        data: {
          reason: 'abandoned',
          destination: SECOND_WALLET,
          asset: USDC_BASE,
          amount: ORDER,
          at: at(71).toISOString(),
        },
      };
      const legacy = evolvePayment(g.state, recorded);
      expect(paymentAsset(legacy)).toBe(USDT_BASE);
      const next = decidePayment({ type: 'Expire', now: at(80) }, legacy);
      expect(next).toEqual([
        {
          type: 'PaymentRecoverable.v1',
          data: {
            reason: 'abandoned',
            destination: SECOND_WALLET,
            asset: USDT_BASE,
            amount: '3000000',
            at: at(80).toISOString(),
          },
        },
      ]);
    });

    it('the reverse, an accepted token late and then one it did not accept: the accepted one stays the payment token, the other is rescued', () => {
      const late = transfer({ from: PAYER });
      const usdt = transfer({ asset: USDT_BASE, amount: '3000000', from: SECOND_WALLET });
      const g = given(
        create({ accepted_tokens: ['USDC'] }),
        { type: 'Expire', now: at(61) },
        observe(late, 70),
        confirm(late, 71),
        clear(72),
        observe(usdt, 73),
        confirm(usdt, 74),
        noneDeployedTo(PAYER, 75),
        clear(75, [SECOND_WALLET]),
      );
      expect(g.history.filter((e) => e.type === 'PaymentRecoverable.v1')).toHaveLength(1);
      expect(toPaymentObject(g.state)).toMatchObject({
        recovery_destination: PAYER,
        recoverable_amount: ORDER,
        recoverable_asset: USDC_BASE,
      });
      expect(
        g.when({ type: 'RequestRescue', asset: USDT_BASE, to: SECOND_WALLET, amount: '3000000', now: at(76) })
          .types,
      ).toEqual(['PaymentRescueRequested.v1']);
    });
  });

  it('a partial payment expires (expired + recoverable abandoned), then a late transfer overpays: all of it recoverable to the payer', () => {
    const partial = transfer({ amount: '5000000' });
    const g = given(create(), observe(partial), confirm(partial));
    const expired = g.when({ type: 'Expire', now: at(60) });
    expect(expired.types).toEqual(['PaymentExpired.v1', 'PaymentRecoverable.v1']);
    expect(expired.object).toMatchObject({
      status: 'recoverable',
      recoverable_reason: 'abandoned',
      recoverable_amount: '5000000',
      amount_paid: '5000000',
    });
    const late = transfer({ amount: '20000000' });
    const after = given(
      create(),
      observe(partial),
      confirm(partial),
      { type: 'Expire', now: at(60) },
      observe(late, 70),
    ).when(confirm(late, 71));
    expect(after.types).toEqual(['PaymentTransferConfirmed.v1', 'PaymentRecoverable.v1']);
    expect(after.object).toMatchObject({
      status: 'recoverable',
      amount_paid: '5000000',
      recoverable_reason: 'abandoned',
      recovery_destination: PAYER,
      recoverable_amount: '25000000',
      non_funding_transactions_count: 1,
    });
  });

  it('a transfer mined before expires_at but observed after still funds the order (block time decides)', () => {
    const t = transfer();
    const { types } = given(create()).when({
      type: 'ObserveTransfer',
      transfer: t,
      blockTime: at(59),
      now: at(62),
    });
    expect(types).toEqual(['PaymentTransferObserved.v1']);
    expect(
      given(create(), { type: 'ObserveTransfer', transfer: t, blockTime: at(59), now: at(62) }).when(
        confirm(t, 63),
      ).types,
    ).toEqual(['PaymentTransferConfirmed.v1', 'PaymentDepositConfirmed.v1']);
  });
});

describe('Payment: over-deposit and recover', () => {
  it('over-deposit (DIRECT): settled, then payment.recoverable with recoverable_reason over_deposit and recovery_destination the payer', () => {
    const t = transfer({ amount: '15000000' });
    const { types, object } = given(create(), observe(t), confirm(t), clear()).when(deployDirect());
    expect(types).toEqual(['PaymentSettled.v1', 'PaymentRecoverable.v1']);
    expect(object).toMatchObject({
      status: 'recoverable',
      amount_paid: '15000000',
      recoverable_reason: 'over_deposit',
      recovery_destination: PAYER,
      recoverable_amount: '2500000',
    });
  });

  it('recover: refused before the payer is final, then requested to the payer (never a supplied destination), then back to settled', () => {
    const t = transfer({ amount: '15000000' });
    const g = given(create(), observe(t), confirm(t), clear(), deployDirect());
    expect(g.whenRejected({ type: 'RequestRecover', now: at(5) })).toMatchObject({
      status: 422,
      code: 'payer_not_final',
    });
    const requested = g.when({ type: 'RequestRecover', now: at(4 + 24 * 60) });
    expect(requested.events).toEqual([
      {
        type: 'PaymentRecoverRequested.v1',
        data: { asset: USDC_BASE, destination: PAYER, requestedAt: at(4 + 24 * 60).toISOString() },
      },
    ]);
    const recovered = g.when({
      type: 'RecordOutflow',
      kind: 'recovered',
      txHash: '0xrecover',
      asset: USDC_BASE,
      amount: '2500000',
      to: PAYER,
      now: at(4 + 24 * 60 + 1),
    });
    expect(recovered.object.status).toBe('settled');
    expect(recovered.object.recoverable_reason).toBeUndefined();
  });

  it('a recover mined again at another log index (its first block taken back unsighted) is recorded once and confirmed', () => {
    const t = transfer({ amount: '15000000' });
    const recover: PaymentCommand = {
      type: 'RecordOutflow',
      kind: 'recovered',
      txHash: '0xrecover',
      logIndex: 0,
      asset: USDC_BASE,
      amount: '2500000',
      to: PAYER,
      now: at(4 + 24 * 60 + 1),
    };
    const g = given(create(), observe(t), confirm(t), clear(), deployDirect(), recover);
    const minedAgain = { ...recover, logIndex: 4, atConfirmations: true, now: at(4 + 24 * 60 + 3) };
    expect(g.when(minedAgain).events).toEqual([]);
    expect(g.when({ type: 'ConfirmOutflow', txHash: '0xrecover', now: at(4 + 24 * 60 + 4) }).types).toEqual([
      'PaymentRecoveryConfirmed.v1',
    ]);
  });

  it('recover with nothing to recover is refused', () => {
    expect(
      given(...paid(), deployDirect()).whenRejected({ type: 'RequestRecover', now: at(9999) }),
    ).toMatchObject({
      code: 'nothing_to_recover',
    });
  });

  it('abandoned: the NONE deployment makes the deposit recoverable; after recover the payment stays expired', () => {
    const partial = transfer({ amount: '5000000' });
    const g = given(
      create(),
      observe(partial),
      confirm(partial),
      { type: 'Expire', now: at(60) },
      clear(61),
      deployNone(62),
    );
    expect(g.history.map((e) => e.type)).toContain('PaymentDeployRequested.v1');
    const done = g.when({
      type: 'RecordOutflow',
      kind: 'recovered',
      txHash: '0xr',
      asset: USDC_BASE,
      amount: '5000000',
      to: PAYER,
      now: at(62 + 24 * 60),
    });
    expect(done.object.status).toBe('expired');
  });
});

describe('Payment: capture, refund, reclaim (TWO_STEP)', () => {
  const escrowedCommands = (): PaymentCommand[] => {
    const t = transfer();
    return [create({ method: 'TWO_STEP' }), observe(t), confirm(t), clear(), deployTwoStep()];
  };
  const escrowed = () => given(...escrowedCommands());
  const outflow = (
    kind: 'captured' | 'refunded' | 'reclaimed',
    amount: string,
    minutes = 10,
  ): Extract<PaymentCommand, { type: 'RecordOutflow' }> => ({
    type: 'RecordOutflow',
    kind,
    txHash: `0x${kind}${amount}`,
    asset: USDC_BASE,
    amount,
    to: kind === 'captured' ? SETTLEMENT : PAYER,
    now: at(minutes),
  });

  const retractOf = (o: { txHash: string; logIndex?: number }, minutes: number): PaymentCommand => ({
    type: 'RetractOutflow',
    txHash: o.txHash,
    logIndex: o.logIndex ?? 0,
    now: at(minutes),
  });

  it('capture request: checked against the escrow, to the settlement address', () => {
    const { events } = escrowed().when({
      type: 'RequestCapture',
      amount: ORDER,
      settlementAddress: SETTLEMENT,
      now: at(5),
    });
    expect(events[0]).toMatchObject({
      type: 'PaymentCaptureRequested.v1',
      data: { amount: ORDER, to: SETTLEMENT },
    });
    expect(
      escrowed().whenRejected({
        type: 'RequestCapture',
        amount: '12500001',
        settlementAddress: SETTLEMENT,
        now: at(5),
      }),
    ).toMatchObject({
      param: 'amount',
      code: 'amount_exceeds_escrow',
    });
  });

  it('capture: a full capture leaves the payment settled (payment.settled waits for its confirmations)', () => {
    const { types, object } = escrowed().when(outflow('captured', ORDER));
    expect(types).toEqual(['PaymentCaptured.v1']);
    expect(PAYMENT_WEBHOOK_BY_EVENT['PaymentCaptured.v1']).toBeNull();
    expect(object).toMatchObject({ status: 'settled', amount_captured: ORDER });
  });

  it('partial capture: stays escrow_confirmed; the rest refunded -> settled (something was captured)', () => {
    const partial = escrowed().when(outflow('captured', '10000000'));
    expect(partial.object).toMatchObject({ status: 'escrow_confirmed', amount_captured: '10000000' });
    const state = partial.events.reduce(evolvePayment, escrowed().state);
    const rest = decidePayment(outflow('refunded', '2500000', 11), state).reduce(evolvePayment, state);
    expect(toPaymentObject(rest)).toMatchObject({
      status: 'settled',
      amount_captured: '10000000',
      amount_refunded: '2500000',
    });
  });

  it('a capture and a refund in one transaction (batched by the merchant wallet) are both recorded, each confirmed', () => {
    const batch = '0xbatched';
    const inBatch = (
      kind: 'captured' | 'refunded',
      amount: string,
      logIndex?: number,
    ): Extract<PaymentCommand, { type: 'RecordOutflow' }> => ({
      ...outflow(kind, amount),
      txHash: batch,
      ...(logIndex === undefined ? {} : { logIndex }),
    });
    const g = given(...escrowedCommands(), inBatch('captured', '10000000', 3));
    const refund = g.when(inBatch('refunded', '2500000', 5));
    expect(refund.types).toEqual(['PaymentRefunded.v1']);
    const both = given(
      ...escrowedCommands(),
      inBatch('captured', '10000000', 3),
      inBatch('refunded', '2500000', 5),
    );
    expect(toPaymentObject(both.state)).toMatchObject({
      status: 'settled',
      amount_captured: '10000000',
      amount_refunded: '2500000',
    });
    expect(heldBalance(both.state, USDC_BASE)).toBe(0n);
    // The same log again, or the transaction without a log index, records nothing.
    expect(both.when(inBatch('refunded', '2500000', 5)).events).toEqual([]);
    expect(both.when(inBatch('captured', '10000000')).events).toEqual([]);
    // Both wait for the chain's confirmations: one sighting of the transaction announces each.
    expect(both.when({ type: 'ConfirmOutflow', txHash: batch, now: at(12) }).types).toEqual([
      'PaymentCaptureConfirmed.v1',
      'PaymentRefundConfirmed.v1',
    ]);
  });

  it('an outflow recorded before the log index was kept stands for its whole transaction', () => {
    const legacy = given(...escrowedCommands(), { ...outflow('captured', '10000000'), txHash: '0xold' });
    expect(legacy.when({ ...outflow('refunded', '2500000'), txHash: '0xold', logIndex: 4 }).events).toEqual(
      [],
    );
  });

  it('refund: escrow_confirmed -> refunded, to the attested payer', () => {
    const requested = escrowed().when({ type: 'RequestRefund', amount: ORDER, now: at(5) });
    expect(requested.events[0]).toMatchObject({ type: 'PaymentRefundRequested.v1', data: { to: PAYER } });
    const { types, object } = escrowed().when(outflow('refunded', ORDER));
    expect(types).toEqual(['PaymentRefunded.v1']);
    expect(object.status).toBe('refunded');
  });

  it('capture after the authorization expiry is refused; the payer reclaims -> refunded', () => {
    const afterExpiry = at(4 + 7 * 24 * 60);
    expect(
      escrowed().whenRejected({
        type: 'RequestCapture',
        amount: ORDER,
        settlementAddress: SETTLEMENT,
        now: afterExpiry,
      }),
    ).toMatchObject({
      status: 422,
      code: 'authorization_expired',
    });
    const { types, object } = escrowed().when(outflow('reclaimed', ORDER, 4 + 7 * 24 * 60 + 1));
    expect(types).toEqual(['PaymentReclaimed.v1']);
    expect(PAYMENT_WEBHOOK_BY_EVENT['PaymentReclaimed.v1']).toBeNull();
    expect(object.status).toBe('refunded');
  });

  it.each<['captured' | 'refunded' | 'reclaimed', string, string]>([
    ['captured', 'PaymentCaptureConfirmed.v1', 'payment.settled'],
    ['refunded', 'PaymentRefundConfirmed.v1', 'payment.refunded'],
    ['reclaimed', 'PaymentReclaimConfirmed.v1', 'payment.refunded'],
  ])(
    '%s: announced (%s -> %s) only when ConfirmOutflow sees its transaction at the chain confirmations, once',
    (kind, fact, webhook) => {
      const minute = kind === 'reclaimed' ? 4 + 7 * 24 * 60 + 1 : 10;
      const recorded = outflow(kind, ORDER, minute);
      const confirmIt: PaymentCommand = {
        type: 'ConfirmOutflow',
        txHash: recorded.txHash,
        now: at(minute + 1),
      };
      const g = given(...escrowedCommands(), recorded);
      const confirmed = g.when(confirmIt);
      expect(confirmed.types).toEqual([fact]);
      expect(PAYMENT_WEBHOOK_BY_EVENT[fact as keyof typeof PAYMENT_WEBHOOK_BY_EVENT]).toBe(webhook);
      // Not a change of the payment: the merchant's object keeps what the record said.
      expect(confirmed.object).toEqual(toPaymentObject(g.state));
      expect(given(...escrowedCommands(), recorded, confirmIt).when(confirmIt).events).toEqual([]);
    },
  );

  it('our capture recorded from its receipt keeps its block (hash and number); a retraction of that block undoes it, one of another block (the capture recorded again where it was mined again) does not', () => {
    const captured = {
      ...outflow('captured', ORDER),
      logIndex: 0,
      blockHash: '0xb1',
      blockNumber: '41',
    };
    const g = given(...escrowedCommands());
    expect(g.when(captured).events[0]?.data).toMatchObject({ blockHash: '0xb1', blockNumber: '41' });
    const recorded = given(...escrowedCommands(), captured);
    const retractFrom = (blockHash: string): PaymentCommand => ({
      type: 'RetractOutflow',
      txHash: captured.txHash,
      logIndex: 0,
      blockHash,
      now: at(12),
    });
    expect(recorded.when(retractFrom('0xb1')).types).toEqual(['PaymentOutflowRetracted.v1']);
    expect(recorded.when(retractFrom('0xb2')).events).toEqual([]);
    expect(recorded.when(retractFrom('0xb2')).object).toMatchObject({
      status: 'settled',
      amount_captured: ORDER,
    });
  });

  it('a transaction that is no recorded outflow is not confirmed (a sighting a reorg took back is never recorded)', () => {
    const g = given(...escrowedCommands(), outflow('captured', ORDER));
    expect(g.when({ type: 'ConfirmOutflow', txHash: '0xother', now: at(11) }).events).toEqual([]);
  });

  it('a capture a reorg takes back before its confirmations is undone: escrow_confirmed again, capturable, recorded again when mined again', () => {
    const captured = { ...outflow('captured', ORDER), logIndex: 0 };
    const retract = retractOf(captured, 11);
    const undone = given(...escrowedCommands(), captured).when(retract);
    expect(undone.events).toEqual([
      {
        type: 'PaymentOutflowRetracted.v1',
        data: {
          txHash: captured.txHash,
          logIndex: 0,
          kind: 'captured',
          asset: USDC_BASE,
          amount: ORDER,
          retractedAt: at(11).toISOString(),
        },
      },
    ]);
    expect(PAYMENT_WEBHOOK_BY_EVENT['PaymentOutflowRetracted.v1']).toBeNull();
    expect(undone.object).toMatchObject({
      status: 'escrow_confirmed',
      amount_captured: '0',
      updated_at: at(11).toISOString(),
    });
    const after = given(...escrowedCommands(), captured, retract);
    expect(
      after.when({ type: 'RequestCapture', amount: ORDER, settlementAddress: SETTLEMENT, now: at(12) }).types,
    ).toEqual(['PaymentCaptureRequested.v1']);
    expect(after.when(retract).events).toEqual([]);
    // The same transaction mined again on the new fork: recorded, then announced at its confirmations.
    const again = given(...escrowedCommands(), captured, retract, { ...captured, now: at(13) });
    expect(again.history.at(-1)?.type).toBe('PaymentCaptured.v1');
    expect(toPaymentObject(again.state)).toMatchObject({ status: 'settled', amount_captured: ORDER });
    expect(again.when({ type: 'ConfirmOutflow', txHash: captured.txHash, now: at(14) }).types).toEqual([
      'PaymentCaptureConfirmed.v1',
    ]);
  });

  it('a refund of the rest undone by a reorg leaves the partial capture: escrow_confirmed with the rest refundable', () => {
    const part = { ...outflow('captured', '10000000'), logIndex: 0 };
    const rest = { ...outflow('refunded', '2500000', 11), logIndex: 1 };
    const undone = given(...escrowedCommands(), part, rest).when({
      type: 'RetractOutflow',
      txHash: rest.txHash,
      logIndex: 1,
      now: at(12),
    });
    expect(undone.types).toEqual(['PaymentOutflowRetracted.v1']);
    expect(undone.object).toMatchObject({
      status: 'escrow_confirmed',
      amount_captured: '10000000',
      amount_refunded: '0',
    });
  });

  it('a capture recorded before the log index was kept is undone by the retraction of any of its logs', () => {
    const legacy = outflow('captured', ORDER);
    const undone = given(...escrowedCommands(), legacy).when({
      type: 'RetractOutflow',
      txHash: legacy.txHash,
      logIndex: 2,
      now: at(11),
    });
    expect(undone.events.map((e) => e.data)).toEqual([
      {
        txHash: legacy.txHash,
        kind: 'captured',
        asset: USDC_BASE,
        amount: ORDER,
        retractedAt: at(11).toISOString(),
      },
    ]);
    expect(undone.object).toMatchObject({ status: 'escrow_confirmed', amount_captured: '0' });
  });

  it('our capture mined again at another log index before its confirmations (its first block never sighted) is the same capture, not a second one', () => {
    // The action's receipt recorded the capture at log 0 of a block a reorg then took back before the deposit worker
    // saw it (no retraction comes); the worker confirms the transaction where it was mined again, at log 3.
    const captured = { ...outflow('captured', ORDER), logIndex: 0 };
    const minedAgain = { ...captured, logIndex: 3, atConfirmations: true, now: at(12) };
    const g = given(...escrowedCommands(), captured);
    expect(g.when(minedAgain).types).toEqual(['PaymentOutflowRetracted.v1', 'PaymentCaptured.v1']);
    const after = given(...escrowedCommands(), captured, minedAgain);
    expect(toPaymentObject(after.state)).toMatchObject({ status: 'settled', amount_captured: ORDER });
    expect(after.when({ type: 'ConfirmOutflow', txHash: captured.txHash, now: at(13) }).types).toEqual([
      'PaymentCaptureConfirmed.v1',
    ]);
    // A second log of another kind in the same transaction (a batched refund) is its own outflow, as before.
    const part = { ...outflow('captured', '10000000'), logIndex: 0 };
    const rest = {
      ...part,
      kind: 'refunded' as const,
      amount: '2500000',
      logIndex: 1,
      atConfirmations: true,
    };
    expect(given(...escrowedCommands(), part).when(rest).types).toEqual(['PaymentRefunded.v1']);
    // An action's receipt recording two equal captures of one transaction (a batch) records both.
    const second = { ...part, logIndex: 1 };
    expect(given(...escrowedCommands(), part).when(second).types).toEqual(['PaymentCaptured.v1']);
  });

  it('a capture confirmed at log 3 and mined again at log 5 in another block after a reorg deeper than the confirmations is recorded once', () => {
    const captured = { ...outflow('captured', ORDER), logIndex: 3, blockHash: '0xb1', atConfirmations: true };
    const confirmed: PaymentCommand = { type: 'ConfirmOutflow', txHash: captured.txHash, now: at(11) };
    const minedAgain = { ...captured, logIndex: 5, blockHash: '0xb2', now: at(20) };
    const g = given(...escrowedCommands(), captured, confirmed);
    expect(g.when(minedAgain).types).toEqual(['PaymentOutflowMinedAgain.v1']);
    const after = given(...escrowedCommands(), captured, confirmed, minedAgain);
    expect(toPaymentObject(after.state)).toMatchObject({ status: 'settled', amount_captured: ORDER });
    expect(after.when({ type: 'ConfirmOutflow', txHash: captured.txHash, now: at(21) }).events).toEqual([]);
    expect(after.when(minedAgain).events).toEqual([]);
    // Two equal captures batched in one transaction (one block) are two, and mined again elsewhere still two.
    const half = (BigInt(ORDER) / 2n).toString();
    const first = { ...outflow('captured', half), logIndex: 3, blockHash: '0xb1', atConfirmations: true };
    const second = { ...first, logIndex: 4 };
    const batch = given(...escrowedCommands(), first, { ...confirmed, txHash: first.txHash }, second);
    expect(batch.history.at(-1)?.type).toBe('PaymentCaptured.v1');
    const reminedFirst = { ...first, logIndex: 5, blockHash: '0xb2', now: at(20) };
    const reminedSecond = { ...second, logIndex: 6, blockHash: '0xb2', now: at(20) };
    const remined = given(...escrowedCommands(), first, second, reminedFirst, reminedSecond);
    expect(toPaymentObject(remined.state)).toMatchObject({ status: 'settled', amount_captured: ORDER });
    // A fact recorded before the block was kept matches nothing: recorded as before.
    const legacy = { ...captured, blockHash: undefined };
    expect(given(...escrowedCommands(), legacy, confirmed).when(minedAgain).types).toEqual([
      'PaymentCaptured.v1',
    ]);
  });

  describe('a transaction mined again after a reorg deeper than the confirmations: each recorded outflow claimed once', () => {
    const third = '2500000';
    /** Worker sightings at the confirmations of equal captures of one transaction in block `blockHash`. */
    const sighting = (logIndex: number, blockHash: string, minutes = 10) => ({
      ...outflow('captured', third, minutes),
      logIndex,
      blockHash,
      atConfirmations: true,
    });
    const confirmedIn = (minutes: number): PaymentCommand => ({
      type: 'ConfirmOutflow',
      txHash: sighting(0, '0xa').txHash,
      now: at(minutes),
    });
    /** Two equal captures batched in one transaction, confirmed in block 0xa at logs 3 and 4. */
    const batchConfirmed = (): PaymentCommand[] => [
      ...escrowedCommands(),
      sighting(3, '0xa'),
      sighting(4, '0xa'),
      confirmedIn(11),
    ];
    const claims = (events: readonly PaymentEvent[]) =>
      events.filter((e) => e.type === 'PaymentOutflowMinedAgain.v1').map((e) => e.data);

    it('a batch of two equal captures mined again in another block: each log claims one of them, recorded once each', () => {
      const b5 = sighting(5, '0xb', 20);
      const b6 = sighting(6, '0xb', 20);
      const first = given(...batchConfirmed()).when(b5);
      expect(first.events).toEqual([
        {
          type: 'PaymentOutflowMinedAgain.v1',
          data: {
            txHash: b5.txHash,
            recordedLogIndex: 3,
            logIndex: 5,
            blockHash: '0xb',
            seenAt: at(20).toISOString(),
          },
        },
      ]);
      expect(PAYMENT_WEBHOOK_BY_EVENT['PaymentOutflowMinedAgain.v1']).toBeNull();
      // The second log of the block claims the other capture, not the one the first claimed.
      const second = given(...batchConfirmed(), b5).when(b6);
      expect(claims(second.events)).toEqual([
        expect.objectContaining({ recordedLogIndex: 4, logIndex: 6, blockHash: '0xb' }),
      ]);
      const both = given(...batchConfirmed(), b5, b6);
      expect(toPaymentObject(both.state)).toMatchObject({
        status: 'escrow_confirmed',
        amount_captured: (2n * BigInt(third)).toString(),
      });
      // A repeat of either sighting or of the confirmation records nothing; the facts replay alike.
      for (const again of [b5, b6, confirmedIn(21)]) expect(both.when(again).events).toEqual([]);
      // The chain back on the old block (a reorg back): its log claims its outflow back, still one capture.
      expect(claims(both.when(sighting(3, '0xa', 21)).events)).toEqual([
        expect.objectContaining({ recordedLogIndex: 3, logIndex: 3, blockHash: '0xa' }),
      ]);
      expect(both.history.reduce(evolvePayment, initialPaymentState())).toEqual(both.state);
    });

    it('a batch of two where only one log is mined again: that one claims one capture, the other stays recorded as it was', () => {
      const g = given(...batchConfirmed(), sighting(7, '0xb', 20));
      expect(claims(g.history)).toEqual([expect.objectContaining({ recordedLogIndex: 3, logIndex: 7 })]);
      expect(toPaymentObject(g.state)).toMatchObject({ amount_captured: (2n * BigInt(third)).toString() });
      // The unclaimed one is confirmed (a reorg deeper than the confirmations): nothing undoes it, an operator is told.
      expect(g.when(retractOf({ txHash: sighting(4, '0xa').txHash, logIndex: 4 }, 21)).events).toEqual([]);
      // Before its confirmations (our action's receipt at one confirmation) the reorg's undo takes the unclaimed one.
      const receipt = (logIndex: number) => ({ ...sighting(logIndex, '0xa'), atConfirmations: undefined });
      const unconfirmed = given(...escrowedCommands(), receipt(3), receipt(4), sighting(7, '0xb', 20));
      expect(unconfirmed.history.slice(-2).map((e) => e.type)).toEqual([
        'PaymentOutflowRetracted.v1',
        'PaymentCaptured.v1',
      ]);
      const undone = unconfirmed.when(retractOf({ txHash: sighting(4, '0xa').txHash, logIndex: 4 }, 21));
      expect(undone.types).toEqual(['PaymentOutflowRetracted.v1']);
      expect(undone.object).toMatchObject({ amount_captured: third });
    });

    it('a third equal log of the transaction mined again, with no earlier counterpart left, is a new outflow', () => {
      const g = given(...batchConfirmed(), sighting(5, '0xb', 20), sighting(6, '0xb', 20));
      const third7 = sighting(7, '0xb', 20);
      expect(g.when(third7).types).toEqual(['PaymentCaptured.v1']);
      const after = given(...batchConfirmed(), sighting(5, '0xb', 20), sighting(6, '0xb', 20), third7);
      expect(toPaymentObject(after.state)).toMatchObject({
        amount_captured: (3n * BigInt(third)).toString(),
      });
      expect(after.when({ ...confirmedIn(21) }).types).toEqual(['PaymentCaptureConfirmed.v1']);
      // One recorded capture mined again with a second equal log beside it: one claim, one new outflow.
      const single = given(
        ...escrowedCommands(),
        sighting(3, '0xa'),
        confirmedIn(11),
        sighting(5, '0xb', 20),
      );
      expect(single.when(sighting(6, '0xb', 20)).types).toEqual(['PaymentCaptured.v1']);
    });

    it('a log mined again at an index a recorded outflow of the old block had claims that outflow first', () => {
      // Block 0xa: captures at 3 and 4; block 0xb: the same two at 4 and 5, and a new equal one at 6.
      const b4 = sighting(4, '0xb', 20);
      const g = given(...batchConfirmed());
      expect(claims(g.when(b4).events)).toEqual([
        expect.objectContaining({ recordedLogIndex: 4, logIndex: 4, blockHash: '0xb' }),
      ]);
      const after = given(...batchConfirmed(), b4, sighting(5, '0xb', 20), sighting(6, '0xb', 20));
      expect(claims(after.history).map((c) => [c.recordedLogIndex, c.logIndex])).toEqual([
        [4, 4],
        [3, 5],
      ]);
      expect(toPaymentObject(after.state)).toMatchObject({
        amount_captured: (3n * BigInt(third)).toString(),
      });
    });

    it('a log mined again at an index whose outflow another log of its block claimed first claims another outflow', () => {
      // Recorded 4 then 3 in block 0xa; in block 0xb the log at 5 claims 4 (the first recorded), then the log at 4 is
      // not that outflow's log: it claims 3.
      const recorded = [...escrowedCommands(), sighting(4, '0xa'), sighting(3, '0xa'), confirmedIn(11)];
      const g = given(...recorded, sighting(5, '0xb', 20));
      expect(claims(g.history)).toEqual([expect.objectContaining({ recordedLogIndex: 4, logIndex: 5 })]);
      expect(claims(g.when(sighting(4, '0xb', 20)).events)).toEqual([
        expect.objectContaining({ recordedLogIndex: 3, logIndex: 4, blockHash: '0xb' }),
      ]);
      const after = given(
        ...recorded,
        sighting(5, '0xb', 20),
        sighting(4, '0xb', 20),
        sighting(6, '0xb', 20),
      );
      expect(toPaymentObject(after.state)).toMatchObject({
        amount_captured: (3n * BigInt(third)).toString(),
      });
    });

    it('mined again once more in a third block: each outflow claimed again, once', () => {
      const g = given(...batchConfirmed(), sighting(5, '0xb', 20), sighting(6, '0xb', 20));
      const c1 = sighting(1, '0xc', 30);
      const c2 = sighting(2, '0xc', 30);
      const after = given(...batchConfirmed(), sighting(5, '0xb', 20), sighting(6, '0xb', 20), c1, c2);
      expect(claims(g.when(c1).events)).toEqual([expect.objectContaining({ recordedLogIndex: 3 })]);
      expect(
        claims(after.history)
          .slice(-2)
          .map((c) => [c.recordedLogIndex, c.blockHash]),
      ).toEqual([
        [3, '0xc'],
        [4, '0xc'],
      ]);
      expect(toPaymentObject(after.state)).toMatchObject({
        amount_captured: (2n * BigInt(third)).toString(),
      });
    });
  });

  const fiatEscrow = (): PaymentCommand[] => {
    const t = transfer();
    return [create({ method: 'TWO_STEP' }, 'fiat'), observe(t), confirm(t), clear(), deployTwoStep()];
  };
  // The provider reported on the payout (the crypto credited): its fiat may be paid.
  const reported: PaymentCommand = {
    type: 'RecordSettlementReport',
    reportId: 'r-1',
    kind: 'deposit_credited',
    reportedAt: at(11),
    now: at(11),
  };

  it('a fiat-settled capture is undone while nothing was reported on its payout (the settlement opens again at the next capture), and kept once the provider reported on it', () => {
    const captured = { ...outflow('captured', ORDER), logIndex: 0 };
    const retract = retractOf(captured, 12);
    expect(toPaymentObject(given(...fiatEscrow(), captured).state)).toMatchObject({
      status: 'settled',
      settlement_status: 'pending',
    });
    const undone = given(...fiatEscrow(), captured, retract);
    expect(undone.history.at(-1)?.type).toBe('PaymentOutflowRetracted.v1');
    expect(undone.state.settlement).toBeNull();
    const recaptured = given(...fiatEscrow(), captured, retract, {
      ...captured,
      txHash: '0xagain',
      now: at(20),
    });
    expect(recaptured.state.settlement?.startedAt).toBe(at(20).toISOString());
    // The provider reported on the payout: the capture stays.
    expect(given(...fiatEscrow(), captured, reported).when(retract).events).toEqual([]);
  });

  it('a fiat-settled capture mined again at another log index after the provider reported on its payout keeps its settlement (not undone and opened afresh)', () => {
    const captured = { ...outflow('captured', ORDER), logIndex: 0 };
    // The receipt's block was taken back unsighted; the worker sees the transaction mined again at log 3.
    const minedAgain = { ...captured, logIndex: 3, atConfirmations: true, now: at(12) };
    const before = given(...fiatEscrow(), captured, reported);
    const settlement = before.state.settlement;
    expect(settlement?.provider.reportIds).toEqual(['r-1']);
    // The same capture: nothing undone (an undo drops the settlement the provider reported on), nothing recorded twice.
    expect(before.when(minedAgain).events).toEqual([]);
    const after = given(...fiatEscrow(), captured, reported, minedAgain);
    expect(after.state.settlement).toEqual(settlement);
    expect(toPaymentObject(after.state)).toMatchObject({ status: 'settled', amount_captured: ORDER });
    // Confirmed where it was mined again, once.
    expect(after.when({ type: 'ConfirmOutflow', txHash: captured.txHash, now: at(13) }).types).toEqual([
      'PaymentCaptureConfirmed.v1',
    ]);
    // The provider's report delivered again is still known.
    expect(after.when({ ...reported, now: at(14) }).events).toEqual([]);
  });

  it('an outflow already confirmed, or not recorded, is not undone by RetractOutflow', () => {
    const captured = { ...outflow('captured', ORDER), logIndex: 0 };
    const confirmed = given(...escrowedCommands(), captured, {
      type: 'ConfirmOutflow',
      txHash: captured.txHash,
      now: at(11),
    });
    expect(
      confirmed.when({ type: 'RetractOutflow', txHash: captured.txHash, logIndex: 0, now: at(12) }).events,
    ).toEqual([]);
    expect(
      escrowed().when({ type: 'RetractOutflow', txHash: '0xother', logIndex: 0, now: at(12) }).events,
    ).toEqual([]);
  });

  it('capture or refund of a DIRECT payment is refused', () => {
    const g = given(...paid(), deployDirect());
    expect(
      g.whenRejected({ type: 'RequestCapture', amount: ORDER, settlementAddress: SETTLEMENT, now: at(5) })
        .code,
    ).toBe('payment_not_capturable');
    expect(g.whenRejected({ type: 'RequestRefund', amount: ORDER, now: at(5) }).code).toBe(
      'payment_not_refundable',
    );
  });
});

describe('Payment: payer dispute (merchant) and attestation (admin)', () => {
  const RIGHT_PAYER = '0x6666666666666666666666666666666666666666';
  const escrowed = () => {
    const t = transfer();
    return [create({ method: 'TWO_STEP' }), observe(t), confirm(t), clear(), deployTwoStep()] as const;
  };
  const disputed = (minutes = 10, block = 100): Extract<PaymentCommand, { type: 'RecordPayerDisputed' }> => ({
    type: 'RecordPayerDisputed',
    chain: BASE,
    txHash: '0xdispute',
    logIndex: 1,
    blockNumber: String(block),
    blockHash: `0xblock${block}`,
    payer: PAYER,
    now: at(minutes),
  });
  const attested = (
    minutes = 20,
    payer = RIGHT_PAYER,
    block = 200,
  ): Extract<PaymentCommand, { type: 'RecordPayerAttested' }> => ({
    type: 'RecordPayerAttested',
    chain: BASE,
    txHash: '0xattest',
    logIndex: 0,
    blockNumber: String(block),
    blockHash: `0xblock${block}`,
    payer,
    finalAt: at(minutes + 24 * 60),
    now: at(minutes),
  });
  const retracted = (
    log: { txHash: string; logIndex: number; blockHash: string },
    minutes: number,
  ): PaymentCommand => ({ type: 'RetractPayerLog', chain: BASE, ...log, now: at(minutes) });
  /** The payer the admin attested, screened clear (as the first payer was before the deploy). */
  const rightPayerCleared = (minutes = 21) => clear(minutes, [RIGHT_PAYER]);

  it('the payment object shows the attested payer, final one day after the deploy', () => {
    const { object } = given(...escrowed()).when({ type: 'Expire', now: at(5) });
    expect(object).toMatchObject({
      payer_status: 'attested',
      payer_final_at: at(4 + 24 * 60).toISOString(),
      payer_addresses: [PAYER],
    });
    const { object: before } = given(create()).when({ type: 'Expire', now: at(1) });
    expect(before).toMatchObject({ payer_status: null, payer_final_at: null });
  });

  it('a dispute is requested within the challenge period, naming the attested payer', () => {
    const { events } = given(...escrowed()).when({ type: 'RequestPayerDispute', now: at(5) });
    expect(events).toEqual([
      { type: 'PaymentPayerDisputeRequested.v1', data: { payer: PAYER, requestedAt: at(5).toISOString() } },
    ]);
  });

  it('a dispute is refused once the payer is final (409 payer_already_final), before the deploy and twice', () => {
    expect(
      given(...escrowed()).whenRejected({ type: 'RequestPayerDispute', now: at(4 + 24 * 60) }),
    ).toMatchObject({ status: 409, code: 'payer_already_final' });
    expect(given(create()).whenRejected({ type: 'RequestPayerDispute', now: at(5) })).toMatchObject({
      status: 409,
      code: 'deposit_not_deployed',
    });
    expect(
      given(...escrowed(), disputed()).whenRejected({ type: 'RequestPayerDispute', now: at(11) }),
    ).toMatchObject({ status: 409, code: 'payer_disputed' });
  });

  it('the PayerDisputed log clears the payer: disputed, refund and recover refused (payer_unknown), recorded once', () => {
    const g = given(...escrowed());
    const { types, object, state } = g.when(disputed());
    expect(types).toEqual(['PaymentPayerDisputed.v1']);
    expect(object).toMatchObject({ payer_status: 'disputed', payer_final_at: null });
    expect(decidePayment(disputed(11), state)).toEqual([]);
    expect(
      given(...escrowed(), disputed()).whenRejected({ type: 'RequestRefund', amount: ORDER, now: at(12) }),
    ).toMatchObject({ status: 422, code: 'payer_unknown' });
  });

  it('the admin attests the right payer after a dispute: attested with a fresh challenge period; refund goes there', () => {
    const g = given(...escrowed(), disputed());
    const { types, object } = g.when(attested());
    expect(types).toEqual(['PaymentPayerAttested.v1']);
    expect(object).toMatchObject({
      payer_status: 'attested',
      payer_final_at: at(20 + 24 * 60).toISOString(),
      payer_addresses: [RIGHT_PAYER],
    });
    const refund = given(...escrowed(), disputed(), attested(), rightPayerCleared()).when({
      type: 'RequestRefund',
      amount: ORDER,
      now: at(22),
    });
    expect(refund.events[0]).toMatchObject({ type: 'PaymentRefundRequested.v1', data: { to: RIGHT_PAYER } });
  });

  it('a PayerDisputed log of an earlier payer, read after the attestation of the next one, clears nothing', () => {
    // The indexer's sighting of the dispute of PAYER (block 100) comes after the admin's attestation (block 200)
    // was recorded (a redelivery, a re-scan): recorded in block order, behind the attestation, which stands.
    const g = given(...escrowed(), attested());
    const late = g.when({ ...disputed(30), txHash: '0xearlier' });
    expect(late.types).toEqual(['PaymentPayerDisputed.v1']);
    expect(late.object).toMatchObject({ payer_status: 'attested', payer_addresses: [RIGHT_PAYER] });
    // A dispute of the payer attested now (a later block) still clears it.
    const now = g.when({
      ...disputed(30, 300),
      txHash: '0xdispute2',
      payer: RIGHT_PAYER.toUpperCase().replace('0X', '0x'),
    });
    expect(now.types).toEqual(['PaymentPayerDisputed.v1']);
    expect(now.object).toMatchObject({ payer_status: 'disputed' });
  });

  it("the deployment's own PayerAttested records nothing (it is the deployment fact)", () => {
    const own: PaymentCommand = { ...attested(5, PAYER), txHash: '0xdeploy' };
    expect(given(...escrowed()).when(own).events).toEqual([]);
  });

  it('recoverable funds of a disputed payer show no destination, and are announced again to the attested one', () => {
    const t = transfer({ amount: '15000000' });
    const g = given(create(), observe(t), confirm(t), clear(), deployDirect());
    const cleared = g.when(disputed());
    expect(cleared.object).toMatchObject({ status: 'recoverable', recovery_destination: null });
    const g2 = given(create(), observe(t), confirm(t), clear(), deployDirect(), disputed());
    expect(g2.whenRejected({ type: 'RequestRecover', now: at(4 + 24 * 60) })).toMatchObject({
      status: 422,
      code: 'payer_unknown',
    });
    const again = g2.when(attested());
    expect(again.types).toEqual(['PaymentPayerAttested.v1', 'PaymentRecoverable.v1']);
    expect(again.object).toMatchObject({ recovery_destination: RIGHT_PAYER, recoverable_amount: '2500000' });
    expect(again.events.map(paymentWebhookType)).toEqual([null, 'payment.recoverable']);
  });

  it('payer logs take effect in block order: an attestation read after a later dispute of its payer leaves the payer disputed', () => {
    const disputeOfRight = {
      ...disputed(30, 300),
      txHash: '0xdispute2',
      payer: RIGHT_PAYER,
    } as const;
    // Chain order: dispute PAYER (100), attest RIGHT_PAYER (200), dispute RIGHT_PAYER (300). Read: 100, 300, 200.
    const outOfOrder = given(...escrowed(), disputed(), disputeOfRight).when(attested(40));
    expect(outOfOrder.types).toEqual(['PaymentPayerAttested.v1']);
    expect(outOfOrder.object).toMatchObject({ payer_status: 'disputed', payer_final_at: null });
    expect(outOfOrder.state.deployment?.payer).toBeNull();
    // Read in chain order, the same logs leave the same payer.
    const inOrder = given(...escrowed(), disputed(), attested(), disputeOfRight);
    expect(inOrder.state.deployment).toEqual(outOfOrder.state.deployment);
  });

  it('a reorg taking the block of a recorded PayerDisputed log undoes it: the deployed payer stands again', () => {
    const g = given(...escrowed(), disputed());
    const undo = retracted({ txHash: '0xdispute', logIndex: 1, blockHash: '0xblock100' }, 12);
    const { types, object } = g.when(undo);
    expect(types).toEqual(['PaymentPayerLogRetracted.v1']);
    expect(object).toMatchObject({
      payer_status: 'attested',
      payer_final_at: at(4 + 24 * 60).toISOString(),
      payer_addresses: [PAYER],
    });
    // Refund goes to the deployed payer again; the retraction of another block, or twice, changes nothing.
    const after = given(...escrowed(), disputed(), undo);
    expect(after.when({ type: 'RequestRefund', amount: ORDER, now: at(13) }).events[0]).toMatchObject({
      data: { to: PAYER },
    });
    expect(after.when(undo).events).toEqual([]);
    expect(g.when(retracted({ txHash: '0xdispute', logIndex: 1, blockHash: '0xother' }, 12)).events).toEqual(
      [],
    );
    // The dispute mined again in another block is a new sighting: recorded again, disputed again.
    const again = after.when({ ...disputed(14, 101), blockHash: '0xblock101' });
    expect(again.types).toEqual(['PaymentPayerDisputed.v1']);
    expect(again.object).toMatchObject({ payer_status: 'disputed' });
  });

  it('a payer log recorded before blocks were kept, delivered again with its block, is the same log: it keeps its place', () => {
    // Recorded before blocks were kept (no block): dispute PAYER, then attest RIGHT_PAYER, in stream order.
    const unblocked = (c: PaymentCommand) =>
      given(...escrowed())
        .when(c)
        .events.map((e) => {
          const { blockNumber: _n, blockHash: _h, ...data } = e.data as Record<string, unknown>;
          return { ...e, data } as PaymentEvent;
        });
    const old = [...unblocked(disputed()), ...unblocked(attested())].reduce(
      evolvePayment,
      given(...escrowed()).state,
    );
    expect(toPaymentObject(old)).toMatchObject({ payer_status: 'attested', payer_addresses: [RIGHT_PAYER] });
    // The dispute's sighting delivered again after the upgrade, with its block: the attestation still stands.
    const again = decidePayment(disputed(30), old);
    expect(again.map((e) => e.type)).toEqual(['PaymentPayerDisputed.v1']);
    const after = again.reduce(evolvePayment, old);
    expect(toPaymentObject(after)).toMatchObject({
      payer_status: 'attested',
      payer_addresses: [RIGHT_PAYER],
    });
    expect(after.payerLogs.map((l) => [l.txHash, l.blockHash])).toEqual([
      ['0xdispute', '0xblock100'],
      ['0xattest', null],
    ]);
    expect(decidePayment(disputed(31), after)).toEqual([]);
    // Now only its own block's retraction takes it back; the same log mined again elsewhere is recorded again.
    expect(
      decidePayment(retracted({ txHash: '0xdispute', logIndex: 1, blockHash: '0xother' }, 32), after),
    ).toEqual([]);
    const undo = decidePayment(
      retracted({ txHash: '0xdispute', logIndex: 1, blockHash: '0xblock100' }, 32),
      after,
    );
    expect(undo.map((e) => e.type)).toEqual(['PaymentPayerLogRetracted.v1']);
    const undone = undo.reduce(evolvePayment, after);
    const mined = decidePayment({ ...disputed(33, 101) }, undone).reduce(evolvePayment, undone);
    expect(toPaymentObject(mined)).toMatchObject({ payer_status: 'disputed' });
  });

  it("a reorg taking the admin's attestation leaves the payer disputed again (refund refused)", () => {
    const g = given(
      ...escrowed(),
      disputed(),
      attested(),
      rightPayerCleared(),
      retracted({ txHash: '0xattest', logIndex: 0, blockHash: '0xblock200' }, 22),
    );
    expect(g.history.at(-1)?.type).toBe('PaymentPayerLogRetracted.v1');
    expect(toPaymentObject(g.state)).toMatchObject({ payer_status: 'disputed', payer_final_at: null });
    expect(g.whenRejected({ type: 'RequestRefund', amount: ORDER, now: at(23) })).toMatchObject({
      status: 422,
      code: 'payer_unknown',
    });
  });

  it('the payer the admin attested is screened: nothing is refunded before, a match flags the payment', () => {
    const g = given(...escrowed(), disputed(), attested());
    expect(addressesToScreen(g.state)).toEqual([RIGHT_PAYER.toLowerCase()]);
    expect(g.whenRejected({ type: 'RequestRefund', amount: ORDER, now: at(21) })).toMatchObject({
      status: 409,
      code: 'payer_screening_pending',
    });
    const match = g.when({
      type: 'RecordScreening',
      result: { kind: 'match', address: RIGHT_PAYER },
      now: at(21),
    });
    expect(match.types).toEqual(['PaymentFlagged.v1']);
    expect(match.object).toMatchObject({ status: 'flagged' });
    // Screened clear: nothing more to screen, the refund goes there.
    const cleared = given(...escrowed(), disputed(), attested(), rightPayerCleared());
    expect(addressesToScreen(cleared.state)).toEqual([]);
  });

  it('a sender whose funds are held as sanctioned, attested as the payer, flags the payment', () => {
    const dust = transfer({ txHash: '0xdust', from: RIGHT_PAYER, amount: '1', logIndex: 9 });
    const g = given(
      ...escrowed(),
      observe(dust),
      confirm(dust),
      { type: 'RecordScreening', result: { kind: 'match', address: RIGHT_PAYER }, now: at(6) },
      disputed(),
      attested(),
    );
    expect(g.state.sanctionedSenders).toEqual([RIGHT_PAYER.toLowerCase()]);
    expect(g.state.flagged).toBe(false);
    expect(addressesToScreen(g.state)).toEqual([RIGHT_PAYER.toLowerCase()]);
    expect(
      g.when({ type: 'RecordScreening', result: { kind: 'match', address: RIGHT_PAYER }, now: at(21) }).types,
    ).toEqual(['PaymentFlagged.v1']);
  });

  it('a second dispute while ours is being relayed is refused (409 payer_dispute_pending) and records nothing', () => {
    const request = { type: 'RequestPayerDispute', deadline: at(70), now: at(5) } as const;
    const g = given(...escrowed(), request);
    expect(toPaymentObject(g.state)).toMatchObject({
      payer_status: 'dispute_pending',
      payer_addresses: [PAYER],
    });
    expect(g.whenRejected({ ...request, now: at(6) })).toMatchObject({
      status: 409,
      code: 'payer_dispute_pending',
    });
    // Its log seen: disputed (409 payer_disputed from then on).
    expect(given(...escrowed(), request, disputed()).whenRejected({ ...request, now: at(11) })).toMatchObject(
      {
        code: 'payer_disputed',
      },
    );
    // The relay failed, or the signature's deadline passed without its log: a new dispute may be requested.
    const failed = given(...escrowed(), request, {
      type: 'RecordPayerDisputeFailed',
      txHash: '0xrev',
      now: at(6),
    });
    expect(failed.history.at(-1)?.type).toBe('PaymentPayerDisputeFailed.v1');
    expect(toPaymentObject(failed.state)).toMatchObject({ payer_status: 'attested' });
    expect(failed.when({ ...request, now: at(7) }).types).toEqual(['PaymentPayerDisputeRequested.v1']);
    expect(g.when({ ...request, now: at(70) }).types).toEqual(['PaymentPayerDisputeRequested.v1']);
  });

  it('payer_addresses leaves out the disputed payer: the effective payer first, none while disputed', () => {
    expect(toPaymentObject(given(...escrowed(), disputed()).state)).toMatchObject({
      payer_status: 'disputed',
      payer_addresses: [],
    });
    expect(toPaymentObject(given(...escrowed(), disputed(), attested()).state).payer_addresses).toEqual([
      RIGHT_PAYER,
    ]);
  });
});

describe('Payment: rescue', () => {
  it('rescue moves another token to the merchant-chosen destination; never the payment token', () => {
    const stray = transfer({ asset: USDT_BASE, amount: '700' });
    const g = given(...paid(), observe(stray), confirm(stray), deployDirect());
    expect(
      g.when({ type: 'RequestRescue', asset: USDT_BASE, to: MERCHANT_CHOSEN, amount: '700', now: at(5) })
        .events[0],
    ).toMatchObject({
      type: 'PaymentRescueRequested.v1',
      data: { asset: USDT_BASE, to: MERCHANT_CHOSEN, amount: '700' },
    });
    expect(
      g.whenRejected({
        type: 'RequestRescue',
        asset: USDC_BASE,
        to: MERCHANT_CHOSEN,
        amount: '1',
        now: at(5),
      }),
    ).toMatchObject({
      code: 'payer_owned_token',
      param: 'asset',
    });
    expect(
      g.whenRejected({
        type: 'RequestRescue',
        asset: USDT_BASE,
        to: MERCHANT_CHOSEN,
        amount: '701',
        now: at(5),
      }),
    ).toMatchObject({
      code: 'amount_exceeds_balance',
      param: 'amount',
    });
    const rescued = g.when({
      type: 'RecordOutflow',
      kind: 'rescued',
      txHash: '0xres',
      asset: USDT_BASE,
      amount: '700',
      to: MERCHANT_CHOSEN,
      now: at(6),
    });
    expect(rescued.object.non_funding_transactions_count).toBe(1);
  });

  it('a rescue is bounded by the balance read on chain when given (native coin, unwatched tokens)', () => {
    const g = given(...paid(), deployDirect());
    const rescue = { type: 'RequestRescue', asset: 'native', to: MERCHANT_CHOSEN, now: at(5) } as const;
    expect(g.when({ ...rescue, amount: '5', onChainBalance: '5' }).events[0]).toMatchObject({
      type: 'PaymentRescueRequested.v1',
      data: { asset: 'native', amount: '5' },
    });
    expect(g.whenRejected({ ...rescue, amount: '6', onChainBalance: '5' }).code).toBe(
      'amount_exceeds_balance',
    );
  });
});

describe('Payment: cancel and expiry', () => {
  it('cancel: pending -> cancelled (payment.cancelled)', () => {
    const { types, object } = given(create()).when({ type: 'Cancel', now: at(5) });
    expect(types).toEqual(['PaymentCancelled.v1']);
    expect(object.status).toBe('cancelled');
    expect(toCheckoutObject(given(create(), { type: 'Cancel', now: at(5) }).state).status).toBe('cancelled');
  });

  it('cancel is refused once the order is paid in full (confirming or confirmed), after expiry, and twice', () => {
    const full = transfer();
    expect(given(create(), observe(full)).whenRejected({ type: 'Cancel', now: at(5) })).toMatchObject({
      status: 409,
      code: 'checkout_has_deposit',
    });
    // Paid in full in two parts, the second still confirming.
    const half = transfer({ amount: '6250000' });
    const rest = transfer({ amount: '6250000' });
    expect(
      given(create(), observe(half), confirm(half), observe(rest, 3)).whenRejected({
        type: 'Cancel',
        now: at(5),
      }).code,
    ).toBe('checkout_has_deposit');
    expect(given(create()).whenRejected({ type: 'Cancel', now: at(61) }).code).toBe('checkout_not_pending');
    // The message names the checkout's status (its payment's too, which may differ).
    expect(given(...paid(), deployDirect()).whenRejected({ type: 'Cancel', now: at(5) })).toMatchObject({
      code: 'checkout_not_pending',
      message: 'Only a pending checkout can be cancelled; this one is paid (its payment is settled).',
    });
    expect(
      given(create(), { type: 'Cancel', now: at(5) }).whenRejected({ type: 'Cancel', now: at(6) }),
    ).toMatchObject({
      status: 409,
      code: 'checkout_not_pending',
    });
  });

  it('one unit of an accepted token from a third party does not block the cancel; it is recoverable to its sender', () => {
    const dust = transfer({ from: SECOND_WALLET, amount: '1' });
    const cancelled = given(create(), observe(dust)).when({ type: 'Cancel', now: at(5) });
    expect(cancelled.types).toEqual(['PaymentCancelled.v1']);
    // Once confirmed, the dust takes the path of any funds left in a cancelled checkout: abandoned, its sender's.
    const g = given(create(), observe(dust), { type: 'Cancel', now: at(5) });
    expect(g.when(confirm(dust, 6)).object).toMatchObject({
      status: 'recoverable',
      recoverable_reason: 'abandoned',
      recovery_destination: SECOND_WALLET,
      recoverable_amount: '1',
    });
  });

  it("a part of the order does not block the cancel (a griefer's 1%, a payer's half): it is recoverable to its payer", () => {
    // 12.50 USDC: 1% is 125000 units; a griefer paying it blocked the merchant's cancel until expiry.
    const share = transfer({ from: SECOND_WALLET, amount: '125000' });
    expect(given(create(), observe(share)).when({ type: 'Cancel', now: at(5) }).types).toEqual([
      'PaymentCancelled.v1',
    ]);
    // A payer's partial payment beside dust: cancelled, and the partial (with the dust) goes back to its payer.
    const dust = transfer({ from: SECOND_WALLET, amount: '1' });
    const partial = transfer({ amount: '6000000' });
    const history = [create(), observe(dust), observe(partial, 2)] as const;
    expect(given(...history).when({ type: 'Cancel', now: at(5) }).types).toEqual(['PaymentCancelled.v1']);
    const cancelled = [...history, { type: 'Cancel', now: at(5) }, confirm(dust, 6)] as const;
    expect(given(...cancelled).when(confirm(partial, 6)).object).toMatchObject({
      status: 'recoverable',
      recoverable_reason: 'abandoned',
      recovery_destination: PAYER,
      recoverable_amount: '6000001',
    });
    // Screened, then deployed NONE for its payer, as any abandoned deposit.
    const screened = given(...cancelled, confirm(partial, 6)).when(clear(7, [PAYER, SECOND_WALLET]));
    expect(screened.events.find((e) => e.type === 'PaymentDeployRequested.v1')?.data).toMatchObject({
      method: 'NONE',
      payer: PAYER,
      amount: '0',
    });
  });

  it('expiry: no valid deposit -> expired (payment.expired); early or repeated timers decide nothing', () => {
    expect(given(create()).when({ type: 'Expire', now: at(59) }).events).toEqual([]);
    const { types, object } = given(create()).when({ type: 'Expire', now: at(60) });
    expect(types).toEqual(['PaymentExpired.v1']);
    expect(object.status).toBe('expired');
    expect(
      given(create(), { type: 'Expire', now: at(60) }).when({ type: 'Expire', now: at(61) }).events,
    ).toEqual([]);
  });

  it('expiry waits for a full payment that arrived in time but is still confirming', () => {
    const t = transfer();
    expect(given(create(), observe(t, 59)).when({ type: 'Expire', now: at(61) }).events).toEqual([]);
  });
});

describe('Payment: dust left in an abandoned deposit waits for the merchant', () => {
  const straggler = (amount: string) => transfer({ from: SECOND_WALLET, amount });
  const recover = (minutes: number): PaymentCommand => ({ type: 'RequestRecover', now: at(minutes) });

  it('below the dust share: announced, but neither screened nor deployed until the merchant asks to recover it', () => {
    // 12.50 USDC: the share is 125000 units.
    const dust = straggler('124999');
    const history = [create(), { type: 'Expire', now: at(60) }, observe(dust, 61)] as const;
    const g = given(...history, confirm(dust, 62));
    expect(toPaymentObject(g.state)).toMatchObject({
      status: 'recoverable',
      recoverable_reason: 'abandoned',
      recovery_destination: SECOND_WALLET,
      recoverable_amount: '124999',
    });
    expect(g.history.map((e) => e.type)).not.toContain('PaymentDeployRequested.v1');
    expect(addressesToScreen(g.state)).toEqual([]);

    const asked = g.when(recover(63));
    expect(asked.types).toEqual(['PaymentDustRecoveryRequested.v1']);
    expect(addressesToScreen(asked.state)).toEqual([SECOND_WALLET.toLowerCase()]);
    const requested = given(...history, confirm(dust, 62), recover(63));
    expect(
      requested.when(clear(64, [SECOND_WALLET])).events.find((e) => e.type === 'PaymentDeployRequested.v1')
        ?.data,
    ).toMatchObject({ method: 'NONE', payer: SECOND_WALLET, amount: '0' });
  });

  /** An expired checkout holding dust just under the share from SECOND_WALLET, confirmed at minute 62. */
  const expiredWithDust = (): PaymentCommand[] => {
    const dust = straggler('124999');
    return [create(), { type: 'Expire', now: at(60) }, observe(dust, 61), confirm(dust, 62)];
  };

  it('the first recover is recorded on the payment (recovery_requested_at); asked again before the deploy, nothing more is recorded and nothing refused', () => {
    const g = given(...expiredWithDust());
    expect(toPaymentObject(g.state)).not.toHaveProperty('recovery_requested_at');
    const asked = g.when(recover(63));
    expect(asked.object).toMatchObject({
      status: 'recoverable',
      recovery_requested_at: at(63).toISOString(),
      deploy_tx_hash: null,
    });
    expect(dustRecoveryPending(asked.state)).toBe(true);

    const again = given(...expiredWithDust(), recover(63));
    expect(again.when(recover(64)).types).toEqual([]);
    // Screened and awaiting its deploy: still the same request.
    expect(again.when(clear(64, [SECOND_WALLET])).object.recovery_requested_at).toBe(at(63).toISOString());
  });

  it('once the asked-for deploy landed, recover runs as for any deposit: payer_not_final, then the recover', () => {
    const deployed = given(...expiredWithDust(), recover(63), clear(64, [SECOND_WALLET]), {
      type: 'RecordDeployed',
      method: 'NONE',
      txHash: '0xdeploy',
      chain: BASE,
      payer: SECOND_WALLET,
      payerFinalAt: at(65 + 24 * 60),
      now: at(65),
    });
    expect(dustRecoveryPending(deployed.state)).toBe(false);
    expect(deployed.whenRejected(recover(66))).toMatchObject({ code: 'payer_not_final' });
    expect(deployed.when(recover(65 + 24 * 60)).types).toEqual(['PaymentRecoverRequested.v1']);
  });

  it('from the dust share on, screened and deployed unasked as before', () => {
    const share = straggler('125000');
    const g = given(create(), { type: 'Expire', now: at(60) }, observe(share, 61), confirm(share, 62));
    expect(addressesToScreen(g.state)).toEqual([SECOND_WALLET.toLowerCase()]);
    expect(g.when(clear(63, [SECOND_WALLET])).types).toContain('PaymentDeployRequested.v1');
  });
});

describe('Payment: fiat-settled merchants', () => {
  it('refuses a checkout while the fiat settlement configuration is incomplete (422 fiat_settlement_required)', () => {
    const command = create();
    if (command.type !== 'CreateCheckout') throw new Error('create() makes a CreateCheckout');
    const incomplete = {
      ...command,
      context: { ...command.context, settlementMode: 'fiat' as const, fiatSettlementComplete: false },
    };
    expect(given().whenRejected(incomplete)).toMatchObject({ status: 422, code: 'fiat_settlement_required' });
    // Input errors come first.
    expect(given().whenRejected({ ...incomplete, input: { currency: 'USD' } })).toMatchObject({
      status: 400,
      param: 'amount',
    });
    const complete = { ...incomplete, context: { ...incomplete.context, fiatSettlementComplete: true } };
    expect(given().when(complete).types).toEqual(['PaymentCreated.v1']);
  });
});

describe('Payment: token and chain chosen before paying (alternate surface configure)', () => {
  const select = (chain: unknown, token: unknown, minutes = 2): PaymentCommand => ({
    type: 'SelectAsset',
    chain,
    token,
    now: at(minutes),
  });

  it('records the choice once; only that asset funds, others are listed as wrong token or chain', () => {
    const chosen = given(create()).when(select(BASE, 'usdt'));
    expect(chosen.events).toEqual([
      {
        type: 'PaymentAssetSelected.v1',
        data: { asset: USDT_BASE, chain: BASE, selectedAt: at(2).toISOString() },
      },
    ]);
    expect(toCheckoutObject(chosen.state).selected_asset).toBe(USDT_BASE);
    expect(given(create(), select(BASE, 'USDT')).when(select(BASE, 'USDT', 3)).events).toEqual([]);

    const usdc = transfer({ asset: USDC_BASE });
    const usdcEth = transfer({ asset: USDC_ETH, chain: ETH });
    const usdt = transfer({ asset: USDT_BASE });
    const { object } = given(create(), select(BASE, 'USDT'), observe(usdc), observe(usdcEth)).when(
      observe(usdt),
    );
    expect(object.transactions.map((t) => [t.tx_hash, t.is_funding, t.non_funding_reason])).toEqual([
      [usdc.txHash, false, 'wrong_token'],
      [usdcEth.txHash, false, 'wrong_chain'],
      [usdt.txHash, true, null],
    ]);
    expect(object.detected_asset).toBe(USDT_BASE);
  });

  it.each<[string, unknown, unknown, string, string | undefined]>([
    ['no chain', undefined, 'USDC', 'chain', undefined],
    ['a chain the checkout does not accept', POLYGON, 'USDC', 'chain', 'unsupported_chain'],
    ['no token', BASE, 42, 'token', undefined],
    ['a token not accepted on that chain', BASE, 'DAI', 'token', 'unsupported_token'],
  ])('refuses %s with 400 naming the param', (_name, chain, token, param, code) => {
    expect(given(create()).whenRejected(select(chain, token))).toMatchObject({
      status: 400,
      type: 'validation_error',
      param,
      ...(code ? { code } : {}),
    });
  });

  it('refuses a change once a deposit arrived, and on a payment no longer pending', () => {
    expect(given(create(), observe(transfer())).whenRejected(select(BASE, 'USDT')).code).toBe(
      'payment_has_deposit',
    );
    expect(
      given(create(), observe(transfer({ amount: '6250000' }))).whenRejected(select(BASE, 'USDT')),
    ).toMatchObject({ status: 409, code: 'payment_has_deposit' });
    expect(given(create(), { type: 'Cancel', now: at(1) }).whenRejected(select(BASE, 'USDT')).code).toBe(
      'payment_not_configurable',
    );
  });

  it('a share of the order in one token blocks a change to another token, never the choice of that token', () => {
    // 12.50 USDC: 1% is 125000 units, sent by a third party.
    const share = transfer({ from: SECOND_WALLET, amount: '125000' });
    const g = given(create(), observe(share));
    expect(g.whenRejected(select(BASE, 'USDT'))).toMatchObject({ status: 409, code: 'payment_has_deposit' });
    expect(g.whenRejected(select(BASE, 'USDT')).message).toContain('USDC');
    const usdc = g.when(select(BASE, 'USDC'));
    expect(usdc.types).toEqual(['PaymentAssetSelected.v1']);
    // The payer's USDC then pays the order beside the share.
    const paid = given(create(), observe(share), select(BASE, 'USDC'), observe(transfer(), 3));
    expect(toPaymentObject(paid.state)).toMatchObject({ detected_asset: USDC_BASE, amount_paid: '12625000' });
  });
});

describe('Payment: configure back to the token that paid', () => {
  const select = (token: string, minutes: number): PaymentCommand => ({
    type: 'SelectAsset',
    chain: BASE,
    token,
    now: at(minutes),
  });

  it('a full payment in a token left by an earlier choice funds once that token is chosen, and the payment goes on', () => {
    const usdc = transfer();
    const g = given(create(), select('USDT', 1), observe(usdc, 2), confirm(usdc, 3));
    expect(toPaymentObject(g.state)).toMatchObject({ amount_paid: '0', detected_asset: null });
    const chosen = g.when(select('USDC', 4));
    expect(chosen.events).toEqual([
      {
        type: 'PaymentAssetSelected.v1',
        data: { asset: USDC_BASE, chain: BASE, selectedAt: at(4).toISOString() },
      },
      {
        type: 'PaymentTransferReclassified.v1',
        data: {
          chain: BASE,
          txHash: usdc.txHash,
          logIndex: 0,
          isFunding: true,
          nonFundingReason: null,
          at: at(4).toISOString(),
        },
      },
      {
        type: 'PaymentDepositConfirmed.v1',
        data: { asset: USDC_BASE, amountPaid: ORDER, confirmedAt: at(4).toISOString() },
      },
    ]);
    expect(chosen.object).toMatchObject({ amount_paid: ORDER, detected_asset: USDC_BASE });
    expect(chosen.object.transactions[0]).toMatchObject({ is_funding: true, non_funding_reason: null });
    const h = given(create(), select('USDT', 1), observe(usdc, 2), confirm(usdc, 3), select('USDC', 4));
    expect(h.when(clear(5)).types).toContain('PaymentDeployRequested.v1');
  });

  it('an unconfirmed transfer of the chosen token funds from the choice and confirms the deposit at its confirmation', () => {
    const usdc = transfer();
    const g = given(create(), select('USDT', 1), observe(usdc, 2));
    const chosen = g.when(select('USDC', 3));
    expect(chosen.types).toEqual(['PaymentAssetSelected.v1', 'PaymentTransferReclassified.v1']);
    expect(chosen.object).toMatchObject({ amount_paid: ORDER, status: 'pending' });
    const h = given(create(), select('USDT', 1), observe(usdc, 2), select('USDC', 3));
    expect(h.when(confirm(usdc, 4)).types).toContain('PaymentDepositConfirmed.v1');
  });

  it('re-classifies in arrival order: a second full payment is a duplicate, another token stays wrong_token', () => {
    const first = transfer();
    const second = transfer();
    const usdt = transfer({ asset: USDT_BASE, amount: '1' });
    const g = given(create(), select('USDT', 1), observe(usdt, 1), observe(first, 2), observe(second, 2));
    const chosen = g.when(select('USDC', 3));
    expect(chosen.object.transactions.map((t) => [t.tx_hash, t.is_funding, t.non_funding_reason])).toEqual([
      [usdt.txHash, false, 'wrong_token'],
      [first.txHash, true, null],
      [second.txHash, false, 'duplicate'],
    ]);
    expect(chosen.object.amount_paid).toBe(ORDER);
  });

  it('a stream recorded before the fact (the choice alone, no re-classification) replays as it was', () => {
    const usdc = transfer();
    const g = given(create(), select('USDT', 1), observe(usdc, 2), confirm(usdc, 3));
    const selected: PaymentEvent = {
      type: 'PaymentAssetSelected.v1',
      data: { asset: USDC_BASE, chain: BASE, selectedAt: at(4).toISOString() },
    };
    const replayed = evolvePayment(g.state, selected);
    expect(replayed.transfers).toEqual(g.state.transfers);
    expect(toPaymentObject(replayed).amount_paid).toBe('0');
  });
});

describe('Payment: configure after dust', () => {
  it('one unit of another token from a third party does not block configure; the chosen token alone funds', () => {
    const dust = transfer({ from: SECOND_WALLET, amount: '1' });
    const chosen = given(create(), observe(dust)).when({
      type: 'SelectAsset',
      chain: BASE,
      token: 'USDT',
      now: at(2),
    });
    expect(chosen.types).toEqual(['PaymentAssetSelected.v1']);
    const usdt = transfer({ asset: USDT_BASE, amount: '6250000' });
    const g = given(
      create(),
      observe(dust),
      { type: 'SelectAsset', chain: BASE, token: 'USDT', now: at(2) },
      observe(usdt, 3),
    );
    const object = toPaymentObject(g.state);
    expect(object.detected_asset).toBe(USDT_BASE);
    expect(object.amount_paid).toBe('6250000');
    expect(object.transactions.map((t) => [t.tx_hash, t.is_funding, t.non_funding_reason])).toEqual([
      [dust.txHash, false, 'wrong_token'],
      [usdt.txHash, true, null],
    ]);
    // Before any transfer of the chosen token, the dust is listed wrong_token already and pays nothing.
    expect(toPaymentObject(chosen.state)).toMatchObject({ amount_paid: '0', detected_asset: null });
    expect(toPaymentObject(chosen.state).transactions[0]).toMatchObject({
      is_funding: false,
      non_funding_reason: 'wrong_token',
    });
  });
});

describe('Payment: reorg', () => {
  it('an unconfirmed transfer retracted by a reorg is simply removed', () => {
    const t = transfer();
    const { types, object } = given(create(), observe(t)).when({
      type: 'RetractTransfer',
      chain: BASE,
      txHash: t.txHash,
      logIndex: 0,
      now: at(2),
    });
    expect(types).toEqual(['PaymentTransferRetracted.v1']);
    expect(object).toMatchObject({
      status: 'pending',
      amount_paid: '0',
      transactions: [],
      detected_asset: null,
    });
  });

  it('a confirmed deposit lost to a reorg -> failed with failure_reason deposit_lost_to_reorg (payment.failed)', () => {
    const lost = transfer();
    const g = given(create(), observe(lost), confirm(lost), clear(), deployDirect());
    const failed = g.when({
      type: 'RetractTransfer',
      chain: BASE,
      txHash: lost.txHash,
      logIndex: 0,
      now: at(9),
    });
    expect(failed.types).toEqual(['PaymentFailed.v1']);
    expect(failed.object).toMatchObject({ status: 'failed', failure_reason: 'deposit_lost_to_reorg' });
    expect(failed.object.failure_message).toContain(lost.txHash);
    expect(failed.object.transactions).toHaveLength(1);
  });

  it("a reorg losing a confirmed transfer that paid nothing (another token's dust, before or after configure) does not fail a paid order", () => {
    // Dust in USDT first (a funding candidate while no token had paid), then the order paid in USDC.
    const dust = transfer({ from: SECOND_WALLET, asset: USDT_BASE, amount: '1' });
    const pay = transfer();
    const retract = (t: ObservedTransfer) =>
      ({ type: 'RetractTransfer', chain: t.chain, txHash: t.txHash, logIndex: 0, now: at(9) }) as const;
    const raced = given(create(), observe(dust), confirm(dust), observe(pay, 2), confirm(pay, 3), clear(4));
    const lostDust = raced.when(retract(dust));
    expect(lostDust.types).toEqual(['PaymentTransferRetracted.v1']);
    expect(lostDust.object).toMatchObject({ status: 'pending', amount_paid: ORDER });
    // Since c71a733 a third party's dust no longer blocks configure: USDC dust, then USDT chosen and paid.
    const usdcDust = transfer({ from: SECOND_WALLET, amount: '1' });
    const usdt = transfer({ asset: USDT_BASE });
    const chosen = given(
      create(),
      observe(usdcDust),
      confirm(usdcDust),
      { type: 'SelectAsset', chain: BASE, token: 'USDT', now: at(2) },
      observe(usdt, 3),
      confirm(usdt, 3),
      clear(4),
      deployDirect(ORDER, 5),
    );
    const lostChosenDust = chosen.when(retract(usdcDust));
    expect(lostChosenDust.types).toEqual(['PaymentTransferRetracted.v1']);
    expect(lostChosenDust.object).toMatchObject({ status: 'settled' });
    // The transfer that paid the order is still lost for good.
    expect(chosen.when(retract(usdt)).types).toEqual(['PaymentFailed.v1']);
  });
});

describe('Payment: funds at the deposit of a payment a reorg failed go back to its payer', () => {
  const HALF = '6250000';
  const recovered = (amount: string, minutes: number): PaymentCommand => ({
    type: 'RecordOutflow',
    kind: 'recovered',
    txHash: `0xrecover${minutes}`,
    asset: USDC_BASE,
    amount,
    to: PAYER,
    now: at(minutes),
  });
  /** Paid in two halves, both confirmed and screened: the DIRECT deploy is requested. */
  const paidInParts = (first: ObservedTransfer, second: ObservedTransfer) =>
    [create(), observe(first), confirm(first), observe(second, 2), confirm(second, 2), clear(3)] as const;

  it('the rest of a payment paid in parts: recoverable to the payer, deployed NONE though DIRECT was asked for, recovered, then failed again', () => {
    const first = transfer({ amount: HALF });
    const second = transfer({ amount: HALF });
    const g = given(...paidInParts(first, second));
    expect(g.history.map((e) => e.type)).toContain('PaymentDeployRequested.v1');
    const failed = g.when(retract(second));
    expect(failed.types).toEqual(['PaymentFailed.v1', 'PaymentRecoverable.v1', 'PaymentDeployRequested.v1']);
    expect(failed.events[2]?.data).toMatchObject({
      method: 'NONE',
      payer: PAYER,
      asset: USDC_BASE,
      amount: '0',
    });
    expect(failed.object).toMatchObject({
      status: 'recoverable',
      failure_reason: 'deposit_lost_to_reorg',
      recoverable_reason: 'abandoned',
      recovery_destination: PAYER,
      recoverable_amount: HALF,
    });
    // The lost transfer stays listed (what failed the payment), unconfirmed: out of what the deposit holds.
    expect(failed.object.transactions.map((t) => [t.tx_hash, t.confirmed])).toEqual([
      [first.txHash, true],
      [second.txHash, false],
    ]);
    expect(heldBalance(failed.state, USDC_BASE)).toBe(6_250_000n);

    const deployed = given(...paidInParts(first, second), retract(second), deployNone(10));
    expect(deployed.when({ type: 'RequestRecover', now: at(10 + 24 * 60) }).events[0]).toMatchObject({
      type: 'PaymentRecoverRequested.v1',
      data: { asset: USDC_BASE, destination: PAYER },
    });
    const back = deployed.when(recovered(HALF, 10 + 24 * 60));
    expect(back.types).toEqual(['PaymentRecovered.v1']);
    expect(back.object).toMatchObject({ status: 'failed', failure_reason: 'deposit_lost_to_reorg' });
    expect(back.object).not.toHaveProperty('recoverable_amount');
  });

  it('the lost transfer mined again on the new fork: listed at its new block, and once confirmed there recoverable to its payer', () => {
    const t = transfer();
    const history = [...paid(t), retract(t)] as const;
    expect(given(...paid(t)).when(retract(t)).types).toEqual(['PaymentFailed.v1']);
    const again = { ...t, blockNumber: '107' };
    const seen = given(...history).when(observe(again, 10));
    expect(seen.types).toEqual(['PaymentTransferReincluded.v1']);
    expect(seen.object.transactions).toEqual([
      expect.objectContaining({ tx_hash: t.txHash, block_number: '107', confirmed: false, is_funding: true }),
    ]);
    expect(seen.object.status).toBe('failed');
    // The same sighting delivered twice records nothing.
    expect(given(...history, observe(again, 10)).when(observe(again, 11)).events).toEqual([]);
    const back = given(...history, observe(again, 10)).when(confirm(again, 11));
    expect(back.types).toEqual([
      'PaymentTransferConfirmed.v1',
      'PaymentRecoverable.v1',
      'PaymentDeployRequested.v1',
    ]);
    expect(back.object).toMatchObject({
      status: 'recoverable',
      recoverable_reason: 'abandoned',
      recovery_destination: PAYER,
      recoverable_amount: ORDER,
    });
  });

  it("the payer's funds coming back go to the payer, not to the sender of dust that survived the reorg", () => {
    const dust = transfer({ from: SECOND_WALLET, amount: '1' });
    const t = transfer();
    const history = [
      create(),
      observe(dust),
      confirm(dust),
      observe(t, 2),
      confirm(t, 2),
      clear(3, [PAYER, SECOND_WALLET]),
      retract(t),
    ] as const;
    const failed = given(...history);
    expect(toPaymentObject(failed.state)).toMatchObject({
      recovery_destination: PAYER,
      recoverable_amount: '1',
    });
    const again = { ...t, blockNumber: '107' };
    const back = given(...history, observe(again, 10)).when(confirm(again, 11));
    expect(back.object).toMatchObject({ recovery_destination: PAYER, recoverable_amount: '12500001' });
    // The NONE deploy (asked for once more than the dust share is back) attests the order's payer: what the
    // recover sends can only go there.
    expect(
      back.events.find((e) => e.type === 'PaymentDeployRequested.v1' && e.data.method === 'NONE')?.data,
    ).toMatchObject({ payer: PAYER });
  });

  it('failed before its senders were screened: the payer who sent the lost transfer is screened before the NONE deploy attests it', () => {
    // Another wallet's transfer above the dust share survives; the payer's, which paid the order, is lost.
    const other = transfer({ from: SECOND_WALLET, amount: '200000' });
    const t = transfer();
    const unreachable: PaymentCommand = {
      type: 'RecordScreening',
      result: { kind: 'unreachable', addresses: [PAYER, SECOND_WALLET] },
      now: at(3),
    };
    const failed = given(
      create(),
      observe(other),
      confirm(other),
      observe(t, 2),
      confirm(t, 2),
      unreachable,
      retract(t),
    );
    expect(failed.history.map((e) => e.type)).not.toContain('PaymentDeployRequested.v1');
    expect(addressesToScreen(failed.state).sort()).toEqual(
      [PAYER, SECOND_WALLET].map((a) => a.toLowerCase()).sort(),
    );
    const deployed = failed.when(clear(10, [PAYER, SECOND_WALLET]));
    expect(deployed.events.find((e) => e.type === 'PaymentDeployRequested.v1')?.data).toMatchObject({
      method: 'NONE',
      payer: PAYER,
    });
  });

  it('nothing is paid twice: after the rest was recovered, the lost transfer back again is recoverable alone', () => {
    const first = transfer({ amount: HALF });
    const second = transfer({ amount: HALF });
    const again = { ...second, blockNumber: '107' };
    const history = [
      ...paidInParts(first, second),
      retract(second),
      deployNone(10),
      recovered(HALF, 10 + 24 * 60),
      observe(again, 11 + 24 * 60),
    ] as const;
    const back = given(...history).when(confirm(again, 12 + 24 * 60));
    expect(back.types).toEqual(['PaymentTransferConfirmed.v1', 'PaymentRecoverable.v1']);
    expect(back.object).toMatchObject({ status: 'recoverable', recoverable_amount: HALF });
    // Taken again by a second reorg: listed still, out of the balance, nothing more to announce.
    const lostAgain = given(...history, confirm(again, 12 + 24 * 60)).when(retract(again, 13 + 24 * 60));
    expect(lostAgain.types).toEqual(['PaymentTransferRetracted.v1']);
    expect(lostAgain.object.transactions).toHaveLength(2);
    expect(heldBalance(lostAgain.state, USDC_BASE)).toBe(0n);
  });

  it('a DIRECT deploy the reorg took with it (not on the new fork): undone, the rest deployed NONE and recoverable; a deploy still there is kept', () => {
    const first = transfer({ amount: HALF });
    const second = transfer({ amount: HALF });
    const history = [...paidInParts(first, second), deployDirect(ORDER, 4), retract(second)] as const;
    const failed = given(...history);
    // The forward is still counted: nothing looks recoverable until the chain says the deploy is gone.
    expect(toPaymentObject(failed.state)).toMatchObject({ status: 'failed', deploy_tx_hash: '0xdeploy' });
    const lost = failed.when({ type: 'RecordDeploymentLost', deployTxHash: '0xdeploy', now: at(10) });
    expect(lost.types).toEqual([
      'PaymentDeploymentLost.v1',
      'PaymentRecoverable.v1',
      'PaymentDeployRequested.v1',
    ]);
    expect(lost.events[2]?.data).toMatchObject({ method: 'NONE', payer: PAYER });
    expect(lost.object).toMatchObject({
      status: 'recoverable',
      deploy_tx_hash: null,
      recovery_destination: PAYER,
      recoverable_amount: HALF,
    });
    expect(
      failed.when({ type: 'RecordDeploymentLost', deployTxHash: '0xother', now: at(10) }).events,
    ).toEqual([]);
    // A payment the reorg did not fail stays paid: its deploy is done again (the funds are still in the deposit).
    expect(
      given(...paidInParts(first, second), deployDirect(ORDER, 4)).when({
        type: 'RecordDeploymentLost',
        deployTxHash: '0xdeploy',
        now: at(10),
      }).types,
    ).toEqual(['PaymentDeploymentLost.v1']);
    // The lost transfer back while the deploy is still on chain (it landed again after it): the order was forwarded,
    // nothing is the payer's.
    const t = transfer();
    const again = { ...t, blockNumber: '107' };
    expect(
      given(...paid(t), deployDirect(), retract(t), observe(again, 10)).when(confirm(again, 11)).types,
    ).toEqual(['PaymentTransferConfirmed.v1']);
  });
});

describe('Payment: a reorg failure undone when the lost transfer and the deploy are both back on the new fork', () => {
  const found = (minutes: number, deployTxHash = '0xdeploy'): PaymentCommand => ({
    type: 'RecordDeploymentFound',
    deployTxHash,
    now: at(minutes),
  });
  const t = transfer();
  const again = { ...t, blockNumber: '107' };
  /** Paid, deployed, failed by the reorg, the lost transfer mined again on the new fork and confirmed there. */
  const backOnNewFork = (deploy: PaymentCommand = deployDirect()) =>
    [...paid(t), deploy, retract(t), observe(again, 10), confirm(again, 11)] as const;

  it('DIRECT: the deploy found on the new fork reinstates the payment: settled again, failure cleared, payment.settled', () => {
    const g = given(...backOnNewFork());
    expect(toPaymentObject(g.state)).toMatchObject({
      status: 'failed',
      failure_reason: 'deposit_lost_to_reorg',
    });
    const back = g.when(found(12));
    expect(back.types).toEqual(['PaymentReinstated.v1']);
    expect(back.events[0]?.data).toEqual({
      deployTxHash: '0xdeploy',
      chain: BASE,
      phase: 'settled',
      at: at(12).toISOString(),
    });
    expect(back.events.map(paymentWebhookType)).toEqual(['payment.settled']);
    expect(back.object).toMatchObject({ status: 'settled', deploy_tx_hash: '0xdeploy', amount_paid: ORDER });
    expect(back.object).not.toHaveProperty('failure_reason');
    expect(back.object).not.toHaveProperty('failure_message');
    expect(back.object.transactions).toEqual([
      expect.objectContaining({ tx_hash: t.txHash, block_number: '107', confirmed: true, is_funding: true }),
    ]);
    expect(toCheckoutObject(back.state).status).toBe('paid');
    // Nothing is the payer's (the order was forwarded), and the same finding again records nothing.
    expect(heldBalance(back.state, USDC_BASE)).toBe(0n);
    expect(given(...backOnNewFork(), found(12)).when(found(13)).events).toEqual([]);
  });

  it('TWO_STEP: reinstated in escrow (payment.escrow_confirmed), capturable again', () => {
    const g = given(...backOnNewFork(deployTwoStep()));
    const back = g.when(found(12));
    expect(back.types).toEqual(['PaymentReinstated.v1']);
    expect(back.events.map(paymentWebhookType)).toEqual(['payment.escrow_confirmed']);
    expect(back.object).toMatchObject({ status: 'escrow_confirmed' });
    expect(escrowRemaining(back.state)).toBe(12_500_000n);
    const capture = given(...backOnNewFork(deployTwoStep()), found(12)).when({
      type: 'RequestCapture',
      amount: ORDER,
      settlementAddress: SETTLEMENT,
      now: at(13),
    });
    expect(capture.types).toEqual(['PaymentCaptureRequested.v1']);
  });

  it('stays failed while the lost transfer is not confirmed again, for another deploy, or a NONE deployment', () => {
    // Found before the transfer is back with its confirmations: nothing yet (asked again later).
    const unconfirmed = given(...paid(t), deployDirect(), retract(t), observe(again, 10));
    expect(unconfirmed.when(found(11)).events).toEqual([]);
    expect(given(...paid(t), deployDirect(), retract(t)).when(found(10)).events).toEqual([]);
    // Another transaction than the recorded deploy.
    expect(given(...backOnNewFork()).when(found(12, '0xother')).events).toEqual([]);
    // A payment that did not fail.
    expect(given(...paid(t), deployDirect()).when(found(12)).events).toEqual([]);
    // The NONE deployment of a payment a reorg failed returns the deposit's funds; it reinstates nothing.
    const half = transfer({ amount: '6250000' });
    const lost = transfer({ amount: '6250000' });
    const lostAgain = { ...lost, blockNumber: '107' };
    const none = given(
      create(),
      observe(half),
      confirm(half),
      observe(lost, 2),
      confirm(lost, 2),
      clear(3),
      retract(lost),
      deployNone(10),
      observe(lostAgain, 11),
      confirm(lostAgain, 12),
    );
    expect(none.when(found(13)).events).toEqual([]);
    expect(toCheckoutObject(none.state).status).toBe('failed');
  });

  const confirmDeploy = (minutes: number): PaymentCommand => ({
    type: 'ConfirmDeployment',
    txHash: '0xdeploy',
    now: at(minutes),
  });
  const webhooks = (events: readonly PaymentEvent[]) =>
    events.map(paymentWebhookType).filter((h) => h !== null);

  it("the re-mined deploy's confirmation (ConfirmDeployment) reinstates a payment whose deploy was not confirmed before the reorg: payment.settled once, never while failed", () => {
    // The reorg took the deploy before its confirmations: the worker follows it to its new block and confirms it there.
    const failed = given(...paid(t), deployDirect(), retract(t));
    expect(failed.when(confirmDeploy(10)).events).toEqual([]);
    const back = given(...backOnNewFork()).when(confirmDeploy(12));
    expect(back.types).toEqual(['PaymentReinstated.v1']);
    expect(back.object).toMatchObject({ status: 'settled' });
    const history = [...backOnNewFork(), confirmDeploy(12), confirmDeploy(13), found(14)];
    expect(webhooks(given(...history).history)).toEqual([
      'payment.deposit_confirmed',
      'payment.failed',
      'payment.settled',
    ]);
  });

  it("a reinstatement is the deploy's announcement: its later confirmation sends no second payment.settled", () => {
    // Found (RecordDeploymentFound) with its confirmations before the worker's receipt pass reached the same deploy.
    const reinstated = given(...backOnNewFork(), found(12));
    expect(reinstated.state.deploymentConfirmed).toBe(true);
    expect(reinstated.when(confirmDeploy(13)).events).toEqual([]);
    // TWO_STEP alike: one payment.escrow_confirmed for the deploy.
    const escrow = given(...backOnNewFork(deployTwoStep()), found(12), confirmDeploy(13));
    expect(webhooks(escrow.history)).toEqual([
      'payment.deposit_confirmed',
      'payment.failed',
      'payment.escrow_confirmed',
    ]);
  });

  it('another transfer than the lost one, confirmed on the new fork and covering the order, reinstates the payment the re-mined deploy paid', () => {
    // The payer's transaction replaced on the new fork by another paying the address (a straggler by then).
    const other = transfer({ blockNumber: '106' });
    const replaced = [...paid(t), deployDirect(), retract(t), observe(other, 10)] as const;
    expect(given(...replaced).when(found(11)).events).toEqual([]);
    const back = given(...replaced, confirm(other, 11)).when(found(12));
    expect(back.types).toEqual(['PaymentReinstated.v1']);
    expect(back.events.map(paymentWebhookType)).toEqual(['payment.settled']);
    expect(back.object).toMatchObject({ status: 'settled' });
    expect(back.object).not.toHaveProperty('failure_reason');
    expect(toCheckoutObject(back.state).status).toBe('paid');
    // The order was forwarded from it: nothing is the payer's.
    expect(heldBalance(back.state, USDC_BASE)).toBe(0n);
    // Less than the order on the new fork: the payment stays failed.
    const short = transfer({ amount: '6250000', blockNumber: '106' });
    expect(
      given(...paid(t), deployDirect(), retract(t), observe(short, 10), confirm(short, 11)).when(found(12))
        .events,
    ).toEqual([]);
  });

  it("a deploy lost at first and found on the chain later (the NONE deploy finds the order's DIRECT deploy): settled, failure cleared", () => {
    const history = [
      ...paid(t),
      deployDirect(),
      retract(t),
      { type: 'RecordDeploymentLost', deployTxHash: '0xdeploy', now: at(10) },
      observe(again, 11),
      confirm(again, 12),
    ] as const;
    const g = given(...history);
    expect(toPaymentObject(g.state)).toMatchObject({ status: 'recoverable', deploy_tx_hash: null });
    // The deposit flow's NONE deploy answers DepositAlreadyDeployed: the chain's DepositDeployed names DIRECT.
    const back = g.when(deployDirect(ORDER, 13));
    expect(back.types).toEqual(['PaymentSettled.v1']);
    expect(back.object).toMatchObject({ status: 'settled', deploy_tx_hash: '0xdeploy' });
    expect(back.object).not.toHaveProperty('failure_reason');
    expect(back.object).not.toHaveProperty('recoverable_amount');
    expect(toCheckoutObject(back.state).status).toBe('paid');
  });

  it("the checkout of a payment a reorg failed says failed (not paid); a fiat settlement failure's stays paid", () => {
    const failed = given(...paid(t), deployDirect(), retract(t));
    expect(toPaymentObject(failed.state).status).toBe('failed');
    expect(toCheckoutObject(failed.state).status).toBe('failed');
    const fiat = transfer();
    const settlementFailed = given(
      create({}, 'fiat'),
      observe(fiat),
      confirm(fiat),
      clear(),
      deployDirect(),
      {
        type: 'RecordSettlementFailed',
        reason: 'provider_rejected',
        now: at(10),
      },
    );
    expect(toPaymentObject(settlementFailed.state).status).toBe('failed');
    expect(toCheckoutObject(settlementFailed.state).status).toBe('paid');
  });
});

describe('Payment: sanctions screening', () => {
  it('match -> flagged (payment.flagged), permanent: no deploy, capture and refund refused, never re-screened', () => {
    const t = transfer();
    const g = given(create({ method: 'TWO_STEP' }), observe(t), confirm(t));
    const flagged = g.when({
      type: 'RecordScreening',
      result: { kind: 'match', address: PAYER },
      now: at(3),
    });
    expect(flagged.types).toEqual(['PaymentFlagged.v1']);
    expect(flagged.object.status).toBe('flagged');
    const after = given(create({ method: 'TWO_STEP' }), observe(t), confirm(t), {
      type: 'RecordScreening',
      result: { kind: 'match', address: PAYER },
      now: at(3),
    });
    expect(addressesToScreen(after.state)).toEqual([]);
    expect(after.when(clear(4)).events).toEqual([]);
    expect(after.whenRejected({ type: 'RequestRefund', amount: ORDER, now: at(5) })).toMatchObject({
      status: 422,
      code: 'payment_flagged',
    });
    expect(
      after.whenRejected({ type: 'RequestCapture', amount: ORDER, settlementAddress: SETTLEMENT, now: at(5) })
        .code,
    ).toBe('payment_flagged');
    expect(after.whenRejected({ type: 'RequestRecover', now: at(5) }).code).toBe('payment_flagged');
    expect(after.when({ type: 'Expire', now: at(999) }).events).toEqual([]);
  });

  it('provider unreachable -> screening_pending (payment.screening_pending, once), then re-screen clear -> the normal path', () => {
    const t = transfer();
    const g = given(create(), observe(t), confirm(t));
    const unreachable: PaymentCommand = {
      type: 'RecordScreening',
      result: { kind: 'unreachable', addresses: [PAYER] },
      now: at(3),
    };
    const pending = g.when(unreachable);
    expect(pending.types).toEqual(['PaymentScreeningUnavailable.v1']);
    expect(pending.object.status).toBe('screening_pending');
    const held = given(create(), observe(t), confirm(t), unreachable);
    expect(held.when({ ...unreachable, now: at(4) }).events).toEqual([]);
    expect(addressesToScreen(held.state)).toEqual([PAYER.toLowerCase()]);
    const rescreened = held.when(clear(5));
    expect(rescreened.types).toEqual(['PaymentPayerCleared.v1', 'PaymentDeployRequested.v1']);
    expect(rescreened.object.status).toBe('pending');
    const settled = given(create(), observe(t), confirm(t), unreachable, clear(5)).when(
      deployDirect(ORDER, 6),
    );
    expect(settled.object.status).toBe('settled');
  });
});

describe('Payment: a sanctioned sender who is not the payer (dust sent to a public deposit address)', () => {
  const SANCTIONED = '0x9999999999999999999999999999999999999999';
  const match = (minutes: number, address = SANCTIONED): PaymentCommand => ({
    type: 'RecordScreening',
    result: { kind: 'match', address },
    now: at(minutes),
  });
  const dust = (over: Partial<ObservedTransfer> = {}) => transfer({ from: SANCTIONED, amount: '1', ...over });

  it('dust after the payer paid: its funds are held, the payment is not flagged, the deploy forwards the order only and nothing of the dust is recoverable', () => {
    const pay = transfer();
    const d = dust();
    const g = given(create(), observe(pay), observe(d), confirm(pay), confirm(d));
    expect(addressesToScreen(g.state)).toEqual([PAYER, SANCTIONED]);
    const held = g.when(match(3));
    expect(held.types).toEqual(['PaymentSanctionedFundsHeld.v1']);
    expect(held.object.status).toBe('pending');
    expect(held.object.transactions[1]).toMatchObject({
      from: SANCTIONED,
      is_funding: false,
      non_funding_reason: 'sanctioned',
    });
    expect(addressesToScreen(held.state)).toEqual([PAYER]);

    const h = given(create(), observe(pay), observe(d), confirm(pay), confirm(d), match(3));
    const cleared = h.when(clear(4));
    expect(cleared.types).toEqual(['PaymentPayerCleared.v1', 'PaymentDeployRequested.v1']);
    expect(cleared.events[1]?.data).toMatchObject({ method: 'DIRECT', payer: PAYER, amount: ORDER });
    const settled = given(
      create(),
      observe(pay),
      observe(d),
      confirm(pay),
      confirm(d),
      match(3),
      clear(4),
    ).when(deployDirect(ORDER, 5));
    expect(settled.types).toEqual(['PaymentSettled.v1']);
    expect(settled.object).toMatchObject({ status: 'settled', amount_paid: ORDER, payer_addresses: [PAYER] });
    expect(settled.object.recoverable_amount).toBeUndefined();
    expect(heldBalance(settled.state, USDC_BASE)).toBe(1n);
  });

  it("dust before the payer paid (it counted as funding): its sender is not the payer, amount_paid is the payer's, the payer is attested", () => {
    const d = dust();
    const pay = transfer();
    const g = given(create(), observe(d), observe(pay), confirm(d), confirm(pay));
    expect(g.history.map((e) => e.type)).toContain('PaymentDepositConfirmed.v1');
    expect(addressesToScreen(g.state)).toEqual([SANCTIONED, PAYER]);
    const held = g.when(match(3));
    expect(held.types).toEqual(['PaymentSanctionedFundsHeld.v1']);
    expect(held.object).toMatchObject({
      status: 'pending',
      amount_paid: ORDER,
      payer_addresses: [PAYER],
      detected_asset: USDC_BASE,
      non_funding_transactions_count: 1,
    });
    const requested = given(create(), observe(d), observe(pay), confirm(d), confirm(pay), match(3)).when(
      clear(4),
    );
    expect(requested.events[1]).toMatchObject({
      type: 'PaymentDeployRequested.v1',
      data: { method: 'DIRECT', payer: PAYER, amount: ORDER },
    });
    // Lost to a reorg, the held dust takes nothing of the order with it.
    const retracted = given(create(), observe(d), observe(pay), confirm(d), confirm(pay), match(3)).when({
      type: 'RetractTransfer',
      chain: d.chain,
      txHash: d.txHash,
      logIndex: d.logIndex,
      now: at(4),
    });
    expect(retracted.types).toEqual(['PaymentTransferRetracted.v1']);
    expect(retracted.object).toMatchObject({ status: 'pending', amount_paid: ORDER });
    // A stale match for the same sender again changes nothing.
    expect(
      given(create(), observe(d), observe(pay), confirm(d), confirm(pay), match(3)).when(match(4)).events,
    ).toEqual([]);
  });

  it('a sanctioned sender the order cannot do without is its payer: flagged (SPEC), whatever another sender added', () => {
    const d = dust({ amount: '2500000' });
    const rest = transfer({ amount: '10000000' });
    const g = given(create({ method: 'TWO_STEP' }), observe(d), observe(rest), confirm(d), confirm(rest));
    const flagged = g.when(match(3));
    expect(flagged.types).toEqual(['PaymentFlagged.v1']);
    expect(flagged.object.status).toBe('flagged');
  });

  it("the payer's over-deposit beside held sanctioned funds is announced without them; recover is refused (it would return them too)", () => {
    const pay = transfer();
    const extra = transfer({ amount: '5' });
    const d = dust();
    const g = given(
      create(),
      observe(pay),
      observe(extra),
      observe(d),
      confirm(pay),
      confirm(extra),
      confirm(d),
      match(3),
      clear(4),
      deployDirect(ORDER, 5),
    );
    expect(g.state.recoverable).toMatchObject({ destination: PAYER, amount: 5n });
    expect(g.whenRejected({ type: 'RequestRecover', now: at(5 + 24 * 60) })).toMatchObject({
      status: 409,
      code: 'sanctioned_funds_held',
    });
  });

  it("an abandoned deposit whose first sender is held as sanctioned: the notice is announced again for the payer and the payer's funds only", () => {
    const d = dust();
    const partial = transfer({ amount: '5000000' });
    const g = given(create(), observe(d), observe(partial), confirm(d), confirm(partial), {
      type: 'Expire',
      now: at(61),
    });
    expect(g.state.recoverable).toMatchObject({ destination: PAYER, amount: 5000001n });
    const held = g.when(match(62));
    expect(held.types).toEqual(['PaymentSanctionedFundsHeld.v1', 'PaymentRecoverable.v1']);
    expect(held.object).toMatchObject({
      status: 'recoverable',
      recovery_destination: PAYER,
      recoverable_amount: '5000000',
      amount_paid: '5000000',
    });
    expect(addressesToScreen(held.state)).toEqual([PAYER]);
  });
  it('an abandoned deposit whose largest sender is sanctioned is flagged (its payer), whatever unit another wallet added', () => {
    const big = dust({ amount: '5000000' });
    const unit = transfer({ amount: '1' });
    const g = given(create(), observe(big), observe(unit), confirm(big), confirm(unit), {
      type: 'Expire',
      now: at(61),
    });
    const flagged = g.when(match(62));
    expect(flagged.types).toEqual(['PaymentFlagged.v1']);
    expect(flagged.object.status).toBe('flagged');
  });
});

describe('Payment: dust sent first names neither the payment token nor the payer', () => {
  const DUSTER = '0x7777777777777777777777777777777777777777';

  it("dust in another accepted token sent first: the payer's payment in the token it paid with funds the order, the dust is wrong_token", () => {
    const dust = transfer({ asset: USDT_BASE, amount: '1', from: DUSTER });
    const pay = transfer();
    const before = given(create(), observe(dust)).state;
    // Shown as the token furthest along, but pinned by nothing: the payer's transfer still funds.
    expect(toPaymentObject(before).detected_asset).toBe(USDT_BASE);
    const g = given(create(), observe(dust), observe(pay), confirm(dust), confirm(pay));
    expect(g.history.find((e) => e.type === 'PaymentDepositConfirmed.v1')).toMatchObject({
      data: { asset: USDC_BASE, amountPaid: ORDER },
    });
    expect(toPaymentObject(g.state)).toMatchObject({
      detected_asset: USDC_BASE,
      amount_paid: ORDER,
      payer_addresses: [PAYER],
      non_funding_transactions_count: 1,
    });
    expect(toPaymentObject(g.state).transactions.map((t) => [t.is_funding, t.non_funding_reason])).toEqual([
      [false, 'wrong_token'],
      [true, null],
    ]);
    expect(addressesToScreen(g.state)).toEqual([PAYER]);
    const requested = g.when(clear(3));
    expect(requested.events[1]).toMatchObject({
      type: 'PaymentDeployRequested.v1',
      data: { method: 'DIRECT', asset: USDC_BASE, payer: PAYER, amount: ORDER },
    });
    // The dust is another token's: the merchant's rescue (its sender screened first), never the payer's recover.
    expect(paymentAsset(requested.state)).toBe(USDC_BASE);
  });

  it('before any token pays the order the one furthest along is shown (by share of its amount), and the first to reach the amount is the payment token for good', () => {
    const dust = transfer({ asset: USDT_BASE, amount: '1', from: DUSTER });
    const part = transfer({ amount: '5000000' });
    expect(toPaymentObject(given(create(), observe(dust), observe(part)).state)).toMatchObject({
      detected_asset: USDC_BASE,
      amount_paid: '5000000',
    });
    // USDT reaches its amount first: USDC sent after it no longer funds.
    const usdt = transfer({ asset: USDT_BASE, amount: '12499999', from: DUSTER });
    const rest = transfer({ amount: '7500000' });
    const { object } = given(create(), observe(dust), observe(part), observe(usdt)).when(observe(rest));
    expect(object).toMatchObject({ detected_asset: USDT_BASE, amount_paid: ORDER });
    expect(object.transactions.map((t) => t.non_funding_reason)).toEqual([
      null,
      'wrong_token',
      null,
      'wrong_token',
    ]);
  });

  it('dust in the payment token sent first: the payer is the sender of the largest part of the funding, not the first sender', () => {
    const dust = transfer({ amount: '1', from: DUSTER });
    const pay = transfer({ amount: '12499999' });
    const g = given(create({ method: 'TWO_STEP' }), observe(dust), observe(pay), confirm(dust), confirm(pay));
    expect(addressesToScreen(g.state)).toEqual([DUSTER, PAYER]);
    // The payer is listed first: a refund goes to payer_addresses[0].
    expect(toPaymentObject(g.state).payer_addresses).toEqual([PAYER, DUSTER]);
    const requested = g.when(clear(3, [DUSTER, PAYER]));
    expect(requested.events.find((e) => e.type === 'PaymentDeployRequested.v1')).toMatchObject({
      data: { method: 'TWO_STEP', payer: PAYER },
    });
  });

  it('an abandoned deposit: the recover destination is the sender of the largest part (ties: the earliest)', () => {
    const dust = transfer({ amount: '1', from: DUSTER });
    const partial = transfer({ amount: '5000000' });
    const expired = given(create(), observe(dust), observe(partial), confirm(dust), confirm(partial), {
      type: 'Expire',
      now: at(61),
    });
    expect(toPaymentObject(expired.state)).toMatchObject({
      recovery_destination: PAYER,
      recoverable_amount: '5000001',
    });
    const tie = transfer({ amount: '1', from: SECOND_WALLET });
    const tied = given(create(), observe(dust), observe(tie), confirm(dust), confirm(tie), {
      type: 'Expire',
      now: at(61),
    });
    expect(toPaymentObject(tied.state).recovery_destination).toBe(DUSTER);
  });
});

describe('Payment: senders after the deploy request and of other tokens are screened before recover or rescue moves their funds', () => {
  const SANCTIONED = '0x9999999999999999999999999999999999999999';
  const match = (minutes: number): PaymentCommand => ({
    type: 'RecordScreening',
    result: { kind: 'match', address: SANCTIONED },
    now: at(minutes),
  });

  it("a payment-token transfer after the deploy is screened; before, recover is refused (sender_screening_pending); a match holds it (never the payer's surplus, no flag)", () => {
    const extra = transfer({ amount: '500000', from: SANCTIONED });
    const g = given(...paid(), deployDirect(), observe(extra, 10), confirm(extra, 11));
    expect(addressesToScreen(g.state)).toEqual([SANCTIONED]);
    expect(g.state.recoverable).toBeNull();
    const held = g.when(match(12));
    expect(held.types).toEqual(['PaymentSanctionedFundsHeld.v1']);
    expect(held.object).toMatchObject({ status: 'settled' });
    expect(held.object.recoverable_amount).toBeUndefined();
    expect(addressesToScreen(held.state)).toEqual([]);

    // The payer's own over-deposit beside it: announced once screened, recover refused while the held funds are there.
    const own = transfer({ amount: '5' });
    const both = given(...paid(), deployDirect(), observe(own, 9), confirm(own, 9), observe(extra, 10));
    expect(both.state.recoverable).toMatchObject({ destination: PAYER, amount: 5n });
    expect(both.whenRejected({ type: 'RequestRecover', now: at(5 + 24 * 60) })).toMatchObject({
      status: 409,
      code: 'sender_screening_pending',
    });
    const matched = given(
      ...paid(),
      deployDirect(),
      observe(own, 9),
      confirm(own, 9),
      observe(extra, 10),
      confirm(extra, 11),
      match(12),
    );
    expect(matched.state.flagged).toBe(false);
    expect(matched.state.recoverable).toMatchObject({ destination: PAYER, amount: 5n });
    expect(matched.whenRejected({ type: 'RequestRecover', now: at(5 + 24 * 60) })).toMatchObject({
      status: 409,
      code: 'sanctioned_funds_held',
    });
  });

  it("another token is screened once deployed: rescue waits for it (sender_screening_pending) and never moves a sanctioned sender's part (sanctioned_funds_held)", () => {
    const bad = transfer({ asset: USDT_BASE, amount: '300', from: SANCTIONED });
    const good = transfer({ asset: USDT_BASE, amount: '700', from: SECOND_WALLET });
    const deployedWithUsdt = [
      ...paid(),
      deployDirect(),
      observe(bad, 10),
      confirm(bad, 11),
      observe(good, 10),
      confirm(good, 11),
    ];
    const g = given(...deployedWithUsdt);
    expect(addressesToScreen(g.state)).toEqual([SANCTIONED, SECOND_WALLET]);
    const rescue = (amount: string): PaymentCommand => ({
      type: 'RequestRescue',
      asset: USDT_BASE,
      to: MERCHANT_CHOSEN,
      amount,
      now: at(13),
    });
    expect(g.whenRejected(rescue('700'))).toMatchObject({ status: 409, code: 'sender_screening_pending' });
    const screened = given(...deployedWithUsdt, match(12), clear(12, [SECOND_WALLET]));
    expect(screened.history.map((e) => e.type)).not.toContain('PaymentFlagged.v1');
    expect(toPaymentObject(screened.state).transactions.at(-2)?.non_funding_reason).toBe('sanctioned');
    expect(screened.when(rescue('700')).types).toEqual(['PaymentRescueRequested.v1']);
    expect(screened.whenRejected(rescue('701'))).toMatchObject({
      status: 409,
      code: 'sanctioned_funds_held',
    });
    expect(
      screened.whenRejected({ ...rescue('1000'), onChainBalance: '1000' } as PaymentCommand),
    ).toMatchObject({ code: 'sanctioned_funds_held' });
  });

  it('an abandoned deposit recovered, then a sanctioned sender: held, not flagged (the payer was screened before the deploy)', () => {
    const late = transfer({ amount: '1', from: SANCTIONED });
    const g = given(...abandonedThenRecovered(), observe(late, 64 + 24 * 60), confirm(late, 64 + 24 * 60));
    expect(addressesToScreen(g.state)).toEqual([SANCTIONED]);
    expect(g.when(match(65 + 24 * 60)).types).toEqual(['PaymentSanctionedFundsHeld.v1']);
  });
});

describe('Payment: a recover or rescue is announced at the chain confirmations (ConfirmOutflow)', () => {
  const recovered = abandonedThenRecovered();
  const confirmRecover = (minute: number): PaymentCommand => ({
    type: 'ConfirmOutflow',
    txHash: '0xrec',
    now: at(minute + 24 * 60),
  });

  it('records the confirmation once, without moving the payment (updated_at kept)', () => {
    const g = given(...recovered);
    const confirmed = g.when(confirmRecover(70));
    expect(confirmed.types).toEqual(['PaymentRecoveryConfirmed.v1']);
    expect(confirmed.object.updated_at).toBe(toPaymentObject(g.state).updated_at);
    expect(given(...recovered, confirmRecover(70)).when(confirmRecover(71)).events).toEqual([]);
  });

  it('a recover a reorg takes back before its confirmations is not undone (its recoverable notice is gone)', () => {
    expect(
      given(...recovered).when({
        type: 'RetractOutflow',
        txHash: '0xrec',
        logIndex: 0,
        now: at(70 + 24 * 60),
      }).events,
    ).toEqual([]);
  });

  it('records nothing for a transaction that is no recorded recover or rescue', () => {
    const other = { ...confirmRecover(70), txHash: '0xother' };
    expect(given(...recovered).when(other).events).toEqual([]);
  });
});

describe('Payment: fiat settlement signals', () => {
  const fiatSettledCommands = () => {
    const t = transfer();
    return [create({}, 'fiat'), observe(t), confirm(t), clear(), deployDirect()];
  };
  const fiatSettled = () => given(...fiatSettledCommands());

  it('settlement_delayed: non-terminal, once per distinct reason, settlement_failure_reason only when known', () => {
    const unknown = fiatSettled().when({ type: 'RecordSettlementDelayed', reason: null, now: at(360) });
    expect(unknown.types).toEqual(['PaymentSettlementDelayed.v1']);
    expect(unknown.object.status).toBe('settled');
    expect(unknown.object.settlement_failure_reason).toBeUndefined();
    const t = transfer();
    const once = given(create({}, 'fiat'), observe(t), confirm(t), clear(), deployDirect(), {
      type: 'RecordSettlementDelayed',
      reason: 'rampoff_withdraw_failed',
      now: at(10),
    });
    expect(
      once.when({ type: 'RecordSettlementDelayed', reason: 'rampoff_withdraw_failed', now: at(20) }).events,
    ).toEqual([]);
    const other = once.when({ type: 'RecordSettlementDelayed', reason: 'deposit_not_credited', now: at(30) });
    expect(other.types).toEqual(['PaymentSettlementDelayed.v1']);
    expect(other.object.settlement_failure_reason).toBe('deposit_not_credited');
  });

  it('settlement_failed -> failed (payment.settlement_failed) with settlement_failure_reason', () => {
    const { types, object } = fiatSettled().when({
      type: 'RecordSettlementFailed',
      reason: 'rampoff_order_failed',
      now: at(4000),
    });
    expect(types).toEqual(['PaymentSettlementFailed.v1']);
    expect(object).toMatchObject({
      status: 'failed',
      settlement_failure_reason: 'rampoff_order_failed',
      failure_reason: 'rampoff_order_failed',
    });
  });

  const report = (
    kind: SettlementReportKind,
    minutes: number,
    reportId = `r-${kind}-${minutes}`,
  ): PaymentCommand => ({
    type: 'RecordSettlementReport',
    reportId,
    kind,
    reportedAt: at(minutes),
    now: at(minutes),
  });
  const deadlines = (minutes: number): PaymentCommand => ({
    type: 'CheckSettlementDeadlines',
    now: at(minutes),
  });

  it('settling opens the payout (settlement_status pending) with its six-hour check; crypto-settled has none', () => {
    const fiat = fiatSettled();
    expect(toPaymentObject(fiat.state)).toMatchObject({ status: 'settled', settlement_status: 'pending' });
    expect(paymentSettlementCheckAt(fiat.state)).toEqual(at(4 + 6 * 60));
    const crypto = given(...paid(), deployDirect());
    expect(toPaymentObject(crypto.state).settlement_status).toBeNull();
    expect(paymentSettlementCheckAt(crypto.state)).toBeNull();
    expect(crypto.whenRejected(report('payout_completed', 10))).toMatchObject({
      status: 409,
      code: 'payment_not_fiat_settled',
    });
  });

  it('the provider reports: a failed bank transfer is delayed at once, a rejection fails the payment', () => {
    const late = fiatSettled().when(report('withdraw_failed', 30));
    expect(late.types).toEqual(['PaymentSettlementReported.v1', 'PaymentSettlementDelayed.v1']);
    expect(late.object).toMatchObject({
      status: 'settled',
      settlement_status: 'delayed',
      settlement_failure_reason: 'rampoff_withdraw_failed',
    });
    const g = given(...fiatSettledCommands(), report('withdraw_failed', 30));
    expect(g.when(report('withdraw_failed', 30)).events).toEqual([]); // the same report again
    const failed = g.when(report('payout_rejected', 40));
    expect(failed.types).toEqual(['PaymentSettlementReported.v1', 'PaymentSettlementFailed.v1']);
    expect(failed.object).toMatchObject({
      status: 'failed',
      settlement_status: 'failed',
      settlement_failure_reason: 'provider_rejected',
      failure_reason: 'provider_rejected',
    });
    expect(paymentSettlementCheckAt(failed.state)).toBeNull();
  });

  it('a completed payout completes the settlement: no webhook, nothing after it', () => {
    const done = fiatSettled().when(report('payout_completed', 30));
    expect(done.types).toEqual(['PaymentSettlementReported.v1', 'PaymentSettlementCompleted.v1']);
    expect(done.object).toMatchObject({ status: 'settled', settlement_status: 'completed' });
    expect(done.events.map(paymentWebhookType)).toEqual([null, null]);
    const after = given(...fiatSettledCommands(), report('payout_completed', 30));
    expect(after.when(deadlines(73 * 60)).events).toEqual([]);
    expect(after.when(report('payout_rejected', 40)).types).toEqual(['PaymentSettlementReported.v1']);
  });

  it('the deadlines by the injected clock: never credited -> delayed at six hours (once), failed at 72', () => {
    const g = fiatSettled();
    expect(g.when(deadlines(4 + 6 * 60 - 1)).events).toEqual([]);
    const delayed = g.when(deadlines(4 + 6 * 60));
    expect(delayed.types).toEqual(['PaymentSettlementDelayed.v1']);
    expect(delayed.object).toMatchObject({
      status: 'settled',
      settlement_status: 'delayed',
      settlement_failure_reason: 'deposit_not_credited',
    });
    const after = given(...fiatSettledCommands(), deadlines(4 + 6 * 60));
    expect(after.when(deadlines(4 + 7 * 60)).events).toEqual([]);
    expect(paymentSettlementCheckAt(after.state)).toEqual(at(4 + 72 * 60));
    const failed = after.when(deadlines(4 + 72 * 60));
    expect(failed.types).toEqual(['PaymentSettlementFailed.v1']);
    expect(failed.object).toMatchObject({
      status: 'failed',
      settlement_failure_reason: 'deposit_not_credited',
    });
  });

  it('TWO_STEP: the payout opens when the capture settles the payment', () => {
    const t = transfer();
    const escrow = given(
      create({ method: 'TWO_STEP' }, 'fiat'),
      observe(t),
      confirm(t),
      clear(),
      deployTwoStep(),
    );
    expect(toPaymentObject(escrow.state).settlement_status).toBeNull();
    const captured = escrow.when({
      type: 'RecordOutflow',
      kind: 'captured',
      txHash: '0xcapture',
      asset: USDC_BASE,
      amount: ORDER,
      to: SETTLEMENT,
      now: at(20),
    });
    expect(captured.object).toMatchObject({ status: 'settled', settlement_status: 'pending' });
    expect(paymentSettlementCheckAt(captured.state)).toEqual(at(20 + 6 * 60));
  });

  describe('a reorg takes the deposit of a fiat-settled payment whose payout the provider made', () => {
    const t = transfer();
    const again = { ...t, blockNumber: '107' };
    const found = (minutes: number): PaymentCommand => ({
      type: 'RecordDeploymentFound',
      deployTxHash: '0xdeploy',
      now: at(minutes),
    });
    const settledFiat = [create({}, 'fiat'), observe(t), confirm(t), clear(), deployDirect()] as const;

    it('paid out before the reorg: the exposure is recorded (no webhook: payment.failed told the merchant); reinstated, it goes and nothing is paid again', () => {
      const lost = given(...settledFiat, report('payout_completed', 6)).when(retract(t));
      expect(lost.types).toEqual(['PaymentFailed.v1', 'PaymentSettlementExposed.v1']);
      expect(lost.events[1]?.data).toEqual({ reason: 'deposit_lost_to_reorg', at: at(9).toISOString() });
      expect(lost.events.map(paymentWebhookType)).toEqual(['payment.failed', null]);
      expect(lost.object).toMatchObject({
        status: 'failed',
        failure_reason: 'deposit_lost_to_reorg',
        settlement_status: 'completed',
        settlement_exposure: {
          reason: 'deposit_lost_to_reorg',
          amount: ORDER,
          currency: 'USD',
          recorded_at: at(9).toISOString(),
        },
      });
      // Recorded once: a later command on the stream records nothing more.
      const g = given(...settledFiat, report('payout_completed', 6), retract(t));
      expect(g.when(report('payout_completed', 6, 'r-again')).types).toEqual([
        'PaymentSettlementReported.v1',
      ]);
      const back = given(
        ...settledFiat,
        report('payout_completed', 6),
        retract(t),
        observe(again, 10),
        confirm(again, 11),
      ).when(found(12));
      expect(back.types).toEqual(['PaymentReinstated.v1']);
      expect(back.object).toMatchObject({ status: 'settled', settlement_status: 'completed' });
      expect(back.object.settlement_exposure).toBeNull();
      expect(paymentSettlementCheckAt(back.state)).toBeNull();
    });

    it('not paid out yet: nothing is asked of the provider while the payment is lost (no deadline check, reports mean nothing)', () => {
      const lost = given(...settledFiat, report('deposit_credited', 6), retract(t));
      expect(toPaymentObject(lost.state)).toMatchObject({ status: 'failed', settlement_status: 'pending' });
      expect(paymentSettlementCheckAt(lost.state)).toBeNull();
      expect(lost.when(deadlines(4 + 73 * 60)).events).toEqual([]);
      const reported = lost.when(report('withdraw_failed', 20));
      expect(reported.types).toEqual(['PaymentSettlementReported.v1']);
      expect(reported.object.settlement_exposure).toBeNull();
    });

    it('paid out by the provider while the payment is lost: the exposure is recorded; reinstated, the settlement completes from that report (never failed at 72 hours, never paid twice)', () => {
      const lost = given(...settledFiat, report('deposit_credited', 6), retract(t));
      const paidOut = lost.when(report('payout_completed', 20));
      expect(paidOut.types).toEqual(['PaymentSettlementReported.v1', 'PaymentSettlementExposed.v1']);
      expect(paidOut.object).toMatchObject({
        status: 'failed',
        settlement_exposure: {
          reason: 'deposit_lost_to_reorg',
          amount: ORDER,
          currency: 'USD',
          recorded_at: at(20).toISOString(),
        },
      });
      const back = given(
        ...settledFiat,
        report('deposit_credited', 6),
        retract(t),
        report('payout_completed', 20),
        observe(again, 30),
        confirm(again, 31),
      ).when(found(32));
      expect(back.types).toEqual(['PaymentReinstated.v1', 'PaymentSettlementCompleted.v1']);
      expect(back.events.map(paymentWebhookType)).toEqual(['payment.settled', null]);
      expect(back.object).toMatchObject({ status: 'settled', settlement_status: 'completed' });
      expect(back.object.settlement_exposure).toBeNull();
      expect(paymentSettlementCheckAt(back.state)).toBeNull();
    });
  });

  it('crypto-settled payments never produce fiat signals', () => {
    const g = given(...paid(), deployDirect());
    expect(
      g.when({ type: 'RecordSettlementFailed', reason: 'provider_rejected', now: at(10) }).events,
    ).toEqual([]);
  });
});

/**
 * Nothing lost: every unit of the payment token still in the deposit address is either escrow (capturable or
 * refundable) or announced as recoverable to the payer; the rest left through a recorded outflow.
 */
function expectNothingLost(state: PaymentState): void {
  const asset = paymentAsset(state);
  if (!asset) return;
  const held = heldBalance(state, asset);
  expect(held).toBe(escrowRemaining(state) + (state.recoverable?.amount ?? 0n));
}

describe('Payment: nothing is lost in the peer cases', () => {
  const late = transfer({ from: SECOND_WALLET });
  const partial = transfer({ amount: '5000000' });
  const overpay = transfer({ amount: '20000000' });
  const short = transfer({ amount: '12400000' });
  const topUp = transfer({ amount: '100000', from: SECOND_WALLET });
  const over = transfer({ amount: '15000000' });
  it.each<[string, PaymentCommand[], string]>([
    [
      'top-up before expiry',
      [
        create(),
        observe(short),
        confirm(short),
        observe(topUp),
        confirm(topUp),
        clear(3, [PAYER, SECOND_WALLET]),
        deployDirect(),
      ],
      'settled',
    ],
    [
      'transfer after expiry',
      [create(), { type: 'Expire', now: at(61) }, observe(late, 70), confirm(late, 71)],
      'recoverable',
    ],
    [
      'partial, expired, then a late overpay',
      [
        create(),
        observe(partial),
        confirm(partial),
        { type: 'Expire', now: at(60) },
        observe(overpay, 70),
        confirm(overpay, 71),
      ],
      'recoverable',
    ],
    ['over-deposit', [create(), observe(over), confirm(over), clear(), deployDirect()], 'recoverable'],
    [
      'over-deposit on TWO_STEP',
      [create({ method: 'TWO_STEP' }), observe(over), confirm(over), clear(), deployTwoStep()],
      'escrow_confirmed',
    ],
  ])('%s: every unit is escrow, forwarded or recoverable (status %s)', (_name, commands, status) => {
    const g = given(...commands);
    expect(toPaymentObject(g.state).status).toBe(status);
    expectNothingLost(g.state);
  });
});

describe('Payment object (SPEC Resources > Payment object)', () => {
  it('shows every SPEC field: id, object, status, method, amount, amount_paid, currency, detected_*, token_amount(_decimal), on_chain_id, deposit_address, deploy_tx_hash, payer_addresses, transactions, non_funding_transactions_count, created_at, updated_at', () => {
    const t = transfer();
    const { object } = given(...paid(t)).when(deployDirect());
    expect(object).toMatchObject({
      id: 'pay_01',
      object: 'payment',
      status: 'settled',
      method: 'DIRECT',
      amount: ORDER,
      amount_paid: ORDER,
      currency: 'USD',
      detected_asset: USDC_BASE,
      detected_token_symbol: 'USDC',
      detected_chain: BASE,
      token_amount: ORDER,
      token_amount_decimal: '12.5',
      on_chain_id: `0x${'ab'.repeat(32)}`,
      deposit_address: '0x5555555555555555555555555555555555555555',
      deploy_tx_hash: '0xdeploy',
      payer_addresses: [PAYER],
      non_funding_transactions_count: 0,
      created_at: T0.toISOString(),
      updated_at: at(4).toISOString(),
    });
    expect(Object.keys(object.transactions[0] ?? {})).toEqual(
      expect.arrayContaining([
        'tx_hash',
        'from',
        'amount',
        'asset',
        'token_symbol',
        'chain',
        'block_number',
        'is_funding',
      ]),
    );
    // failure_reason / failure_message, recoverable_reason / recovery_destination and settlement_failure_reason
    // appear only on the payments they describe.
    expect(object).not.toHaveProperty('failure_reason');
    expect(object).not.toHaveProperty('failure_message');
    expect(object).not.toHaveProperty('recoverable_reason');
    expect(object).not.toHaveProperty('recovery_destination');
    expect(object).not.toHaveProperty('settlement_failure_reason');
  });

  it('the checkout object lists the accepted assets with their token amounts and the deposit address', () => {
    const checkout = toCheckoutObject(given(create()).state);
    expect(checkout).toMatchObject({
      id: 'chk_01',
      object: 'checkout',
      status: 'pending',
      payment_id: 'pay_01',
      accepted_chains: [BASE, ETH],
      deposit_address: '0x5555555555555555555555555555555555555555',
      selected_asset: null,
      checkout_url: 'https://pay.example/checkout/chk_01',
    });
    expect(checkout.accepted_assets.find((a) => a.asset === DAI_ETH)).toMatchObject({
      token_amount: '12500000000000000000',
      token_amount_decimal: '12.5',
    });
    const t = transfer();
    expect(toCheckoutObject(given(create(), observe(t), confirm(t)).state).status).toBe('paid');
  });
});

describe('Payment events -> webhook types', () => {
  it('every payment webhook type (SPEC and ours) is produced by at least one fact, and nothing else is', () => {
    const produced = new Set(Object.values(PAYMENT_WEBHOOK_BY_EVENT).filter((v) => v !== null));
    // payment.escrow_confirmed comes from a TWO_STEP deployment's confirmation (or reinstatement): paymentWebhookType.
    produced.add('payment.escrow_confirmed');
    expect([...produced].sort()).toEqual([...PAYMENT_WEBHOOK_TYPES].sort());
  });

  it.each<[string, string[]]>([
    ['payment.deposit_confirmed', ['PaymentDepositConfirmed.v1']],
    [
      'payment.settled',
      ['PaymentDeploymentConfirmed.v1', 'PaymentCaptureConfirmed.v1', 'PaymentReinstated.v1'],
    ],
    ['payment.escrow_confirmed', []],
    ['payment.expired', ['PaymentExpired.v1']],
    ['payment.cancelled', ['PaymentCancelled.v1']],
    ['payment.failed', ['PaymentFailed.v1']],
    ['payment.refunded', ['PaymentRefundConfirmed.v1', 'PaymentReclaimConfirmed.v1']],
    ['payment.settlement_delayed', ['PaymentSettlementDelayed.v1']],
    ['payment.settlement_failed', ['PaymentSettlementFailed.v1']],
    ['payment.flagged', ['PaymentFlagged.v1']],
    ['payment.screening_pending', ['PaymentScreeningUnavailable.v1']],
    ['payment.recoverable', ['PaymentRecoverable.v1']],
    ['payment.recovered', ['PaymentRecoveryConfirmed.v1']],
    ['payment.rescued', ['PaymentRescueConfirmed.v1']],
  ])('%s is produced exactly by %j', (webhook, facts) => {
    const producers = Object.entries(PAYMENT_WEBHOOK_BY_EVENT)
      .filter(([, type]) => type === webhook)
      .map(([fact]) => fact);
    expect(producers.sort()).toEqual([...facts].sort());
  });

  it('bookkeeping facts produce no webhook', () => {
    for (const type of [
      'PaymentCreated.v1',
      'PaymentTransferObserved.v1',
      'PaymentTransferConfirmed.v1',
      'PaymentDeployRequested.v1',
      'PaymentCaptureRequested.v1',
    ] as const) {
      expect(PAYMENT_WEBHOOK_BY_EVENT[type]).toBeNull();
    }
  });
});

describe('Payment: the merchant on the chains deposits are deployed on', () => {
  const withChains = (
    chainRegistrations: Record<string, MerchantChainStatus>,
    input: CreateCheckoutInput = {},
  ): PaymentCommand => {
    const command = create(input);
    if (command.type !== 'CreateCheckout') throw new Error('create() makes a CreateCheckout');
    return { ...command, context: { ...command.context, chainRegistrations } };
  };

  it('refuses a checkout of a merchant without a signer on chain (422 merchant_signer_required), after input errors', () => {
    expect(given().whenRejected(withChains({ [BASE]: 'not_started' }))).toMatchObject({
      status: 422,
      type: 'cannot_process',
      code: 'merchant_signer_required',
      param: 'merchant_signer',
    });
    expect(given().whenRejected(withChains({ [BASE]: 'not_started' }, { amount: 'x' }))).toMatchObject({
      status: 400,
      param: 'amount',
    });
  });

  it('refuses a checkout while a settings change awaits the MerchantChange on an accepted chain (409 merchant_change_pending)', () => {
    const error = given().whenRejected(
      withChains({ [BASE]: 'change_requires_merchant_signature', [ETH]: 'registered' }),
    );
    expect(error).toMatchObject({ status: 409, code: 'merchant_change_pending', param: 'accepted_chains' });
    expect(error.message).toContain('POST /settings/merchant-change');
    expect(error.message).toContain(BASE);
  });

  it('takes a checkout whose accepted chains are registered or being registered, or leave the held chain out', () => {
    expect(given().when(withChains({ [BASE]: 'registered', [ETH]: 'pending' })).types).toEqual([
      'PaymentCreated.v1',
    ]);
    expect(
      given().when(
        withChains(
          { [BASE]: 'change_requires_merchant_signature', [ETH]: 'registered' },
          { accepted_chains: [ETH] },
        ),
      ).types,
    ).toEqual(['PaymentCreated.v1']);
    // A chain the deployment does not act on is not asked about (no statuses: no chain layer).
    expect(given().when(withChains({})).types).toEqual(['PaymentCreated.v1']);
  });
});

describe('Payment: a held deploy is shown on the payment', () => {
  const held = (reason: 'merchant_change_pending' | 'merchant_not_registered' = 'merchant_change_pending') =>
    ({ type: 'RecordDeployHeld', chain: BASE, reason, now: at(4) }) as const;

  it('records the hold once per reason (deploy_hold_reason), and the deployment ends it', () => {
    const t = transfer();
    const requested = [create(), observe(t), confirm(t), clear()];
    const first = given(...requested).when(held());
    expect(first.types).toEqual(['PaymentDeployHeld.v1']);
    expect(first.object).toMatchObject({ status: 'pending', deploy_hold_reason: 'merchant_change_pending' });
    expect(given(...requested, held()).when(held()).events).toEqual([]);
    expect(given(...requested, held()).when(held('merchant_not_registered')).types).toEqual([
      'PaymentDeployHeld.v1',
    ]);
    const deployed = given(...requested, held()).when(deployDirect(ORDER, 5));
    expect(deployed.object).toMatchObject({ status: 'settled', deploy_hold_reason: null });
  });

  it('records nothing before a deploy is requested or after the deployment', () => {
    const t = transfer();
    expect(given(create(), observe(t)).when(held()).events).toEqual([]);
    expect(given(create(), observe(t), confirm(t), clear(), deployDirect()).when(held()).events).toEqual([]);
    expect(given(create()).when({ type: 'Expire', now: at(1) }).object).toMatchObject({
      deploy_hold_reason: null,
    });
  });
});
