import { DomainError } from '@stablepay/util';
import {
  type CreateContext,
  type CreateSubscriptionCheckoutInput,
  decideSubscriptionCheckout,
  evolveSubscriptionCheckout,
  initialSubscriptionCheckoutState,
  type SubscriptionCheckoutCommand,
  subscriptionCheckoutObject,
} from './subscription-checkout';
import type { SubscriptionCheckoutEvent, SubscriptionCheckoutObject } from './subscription-checkout.events';

const now = new Date('2026-06-01T10:00:00.000Z');
const ID = 'schk_01jxyzexample0000000000000';
const ONCHAIN = `0x${'ab'.repeat(32)}`;
const CHAINS = ['eip155:1', 'eip155:137', 'eip155:42161', 'eip155:8453', 'eip155:10'];

const cryptoContext: CreateContext = {
  availableChains: CHAINS.map((caip2) => ({
    caip2,
    tokenSymbols: caip2 === 'eip155:8453' ? ['USDC'] : ['USDC', 'USDT'],
  })),
  quotedTokenSymbols: ['USDC', 'USDT'],
  settlement: { mode: 'crypto' },
};

const create = (
  input: CreateSubscriptionCheckoutInput,
  context: Partial<CreateContext> = {},
): SubscriptionCheckoutCommand => ({
  type: 'CreateSubscriptionCheckout',
  id: ID,
  onchainId: ONCHAIN,
  businessName: 'Acme',
  checkoutUrl: `https://pay.example/subscribe/${ID}`,
  input,
  context: { ...cryptoContext, ...context },
  now,
});

/** given events, when command, then events (or error). */
function given(...events: SubscriptionCheckoutEvent[]) {
  const state = events.reduce(evolveSubscriptionCheckout, initialSubscriptionCheckoutState());
  return {
    when: (command: SubscriptionCheckoutCommand) => {
      const run = () => decideSubscriptionCheckout(command, state);
      return {
        then: (expected: SubscriptionCheckoutEvent[]) => expect(run()).toEqual(expected),
        /** The API object as of the decided events: the projection of the state they evolve to. */
        thenObject: (shape: Partial<Record<keyof SubscriptionCheckoutObject, unknown>>) => {
          const events = run();
          expect(events).toHaveLength(1);
          const { checkout } = events.reduce(evolveSubscriptionCheckout, state);
          expect(checkout && subscriptionCheckoutObject(checkout)).toMatchObject(shape);
        },
        thenError: (shape: Partial<DomainError>) => {
          let thrown: unknown;
          try {
            run();
          } catch (e) {
            thrown = e;
          }
          expect(thrown).toBeInstanceOf(DomainError);
          expect(thrown).toMatchObject(shape);
        },
      };
    },
  };
}

const createdEvent = (
  input: CreateSubscriptionCheckoutInput = { price: '150000', price_currency: 'ARS' },
): SubscriptionCheckoutEvent => {
  const [event] = decideSubscriptionCheckout(create(input), initialSubscriptionCheckoutState());
  if (!event) throw new Error('no event');
  return event;
};
const base = { price: '150000', price_currency: 'ARS' } as const;
const invalid = (param: string, code?: string) => ({
  status: 400,
  type: 'validation_error' as const,
  param,
  ...(code ? { code } : {}),
});
const later = (ms: number) => new Date(now.getTime() + ms);

describe('subscription checkout aggregate', () => {
  describe('create', () => {
    it('records the decided inputs and derived values (the SPEC defaults applied) as facts', () => {
      given()
        .when(create(base))
        .then([
          {
            type: 'SubscriptionCheckoutCreated.v2',
            data: {
              id: ID,
              onchainId: ONCHAIN,
              businessName: 'Acme',
              checkoutUrl: `https://pay.example/subscribe/${ID}`,
              price: '150000',
              priceCurrency: 'ARS',
              cap: '1500000',
              budget: '1500000',
              periodDuration: 2592000,
              supportedChains: CHAINS,
              metadata: {},
              externalCustomerId: null,
              successUrl: null,
              cancelUrl: null,
              returnUrl: null,
              expiresAt: '2026-06-01T10:05:00.000Z',
              createdAt: now.toISOString(),
            },
          },
        ]);
    });

    it('the object is the projection of the created state', () => {
      given()
        .when(create(base))
        .thenObject({
          object: 'subscription_checkout',
          id: ID,
          status: 'pending',
          onchain_id: ONCHAIN,
          business_name: 'Acme',
          subscriber: null,
          external_customer_id: null,
          price: '150000',
          price_currency: 'ARS',
          period_duration: 2592000,
          cap: '1500000',
          budget: '1500000',
          checkout_url: `https://pay.example/subscribe/${ID}`,
          success_url: null,
          cancel_url: null,
          return_url: null,
          metadata: {},
          supported_chains: CHAINS,
          expires_at: '2026-06-01T10:05:00.000Z',
          created_at: now.toISOString(),
          updated_at: now.toISOString(),
          completed_at: null,
          cancelled_at: null,
          expired_at: null,
          cancellation_reason: null,
        });
    });

    it('is created once', () => {
      given(createdEvent())
        .when(create(base))
        .thenError({ status: 409, code: 'subscription_checkout_exists' });
    });

    describe('price, cap and budget (SPEC Rules 1-2)', () => {
      it('budget defaults to 10 x price and cap to the budget', () => {
        given()
          .when(create({ ...base, price: '999' }))
          .thenObject({ price: '999', budget: '9990', cap: '9990' });
      });
      it('cap defaults to a given budget', () => {
        given()
          .when(create({ ...base, budget: '300000' }))
          .thenObject({ budget: '300000', cap: '300000' });
      });
      it('keeps a given cap under the derived budget', () => {
        given()
          .when(create({ ...base, cap: '200000' }))
          .thenObject({ cap: '200000', budget: '1500000' });
      });
      it('accepts price = cap = budget', () => {
        given()
          .when(create({ ...base, cap: '150000', budget: '150000' }))
          .thenObject({ price: '150000', cap: '150000', budget: '150000' });
      });
      it('refuses cap below price (param cap)', () => {
        given()
          .when(create({ ...base, cap: '149999' }))
          .thenError(invalid('cap'));
      });
      it('refuses a budget below price when cap is derived (param budget)', () => {
        given()
          .when(create({ ...base, budget: '100' }))
          .thenError(invalid('budget'));
      });
      it('refuses cap above the given budget (param cap)', () => {
        given()
          .when(create({ ...base, cap: '300001', budget: '300000' }))
          .thenError(invalid('cap'));
      });
      it('refuses cap above the default budget of 10 x price (param cap)', () => {
        given()
          .when(create({ ...base, cap: '1500001' }))
          .thenError(invalid('cap'));
      });
      it('requires price and price_currency', () => {
        given()
          .when(create({ price_currency: 'ARS' }))
          .thenError(invalid('price'));
        given()
          .when(create({ price: '100' }))
          .thenError(invalid('price_currency'));
      });
      it.each(['10.5', '-1', '+1', '1,000', '1 000', '1e3', '0x10', '01', '', ' 1', '0'])(
        'refuses the amount %j for price, cap and budget',
        (bad) => {
          given()
            .when(create({ ...base, price: bad }))
            .thenError(invalid('price'));
          given()
            .when(create({ ...base, cap: bad }))
            .thenError(invalid('cap'));
          given()
            .when(create({ ...base, budget: bad }))
            .thenError(invalid('budget'));
        },
      );
      it('refuses amounts of more than 30 digits, and a price whose default budget would exceed that', () => {
        given()
          .when(create({ ...base, budget: '1'.repeat(31) }))
          .thenError(invalid('budget'));
        given()
          .when(create({ ...base, price: '9'.repeat(30) }))
          .thenError(invalid('price'));
        given()
          .when(create({ ...base, price: '9'.repeat(29) }))
          .thenObject({ budget: `${'9'.repeat(29)}0` });
      });
      it('keeps amounts exact beyond 2^53', () => {
        given()
          .when(create({ ...base, price: '9007199254740993' }))
          .thenObject({ budget: '90071992547409930' });
      });
    });

    describe('currency', () => {
      it.each(['AR', 'ARSS', 'A1S', 'USDC', ''])('refuses %j as price_currency', (bad) => {
        given()
          .when(create({ ...base, price_currency: bad }))
          .thenError(invalid('price_currency'));
      });
      it('normalises the code to upper case', () => {
        given()
          .when(create({ ...base, price_currency: 'ars' }))
          .thenObject({ price_currency: 'ARS' });
      });
      it.each([
        ['three letters that are no ISO-4217 currency', 'XYZ'],
        ['a withdrawn ISO-4217 code', 'DEM'],
        ['a unit of account, not money', 'XDR'],
      ])(
        'refuses %s (%j) as price_currency with 422 price_currency_not_quotable saying why, whatever the rates quote',
        (_label, bad) => {
          given()
            .when(create({ ...base, price_currency: bad }))
            .thenError({
              status: 422,
              type: 'cannot_process',
              code: 'price_currency_not_quotable',
              param: 'price_currency',
              message: `${bad} is not an ISO-4217 currency in use, so no rate can quote it (for example ARS).`,
            });
        },
      );
      it.each(['JPY', 'KWD'])(
        'refuses %j, a currency without hundredths, as price_currency with 422 price_currency_not_quotable (SPEC prices in hundredths)',
        (bad) => {
          given()
            .when(create({ ...base, price_currency: bad }))
            .thenError({
              status: 422,
              code: 'price_currency_not_quotable',
              param: 'price_currency',
              message: `${bad} has no hundredths: prices are in hundredths of a two-decimal currency, so ${bad} cannot be quoted.`,
            });
        },
      );
      it("takes ISO's testing code XTS (the rates sandbox's outage), priced as any currency", () => {
        given()
          .when(create({ ...base, price_currency: 'xts' }))
          .thenObject({ price_currency: 'XTS' });
      });
    });

    describe('period_duration (SPEC: minimum 3600 seconds)', () => {
      it('accepts exactly 3600', () => {
        given()
          .when(create({ ...base, period_duration: 3600 }))
          .thenObject({ period_duration: 3600 });
      });
      it.each([3599, 0, -3600, 3600.5, 315360001])('refuses %p', (bad) => {
        given()
          .when(create({ ...base, period_duration: bad }))
          .thenError(invalid('period_duration'));
      });
    });

    describe('expires_in (SPEC: default 5 minutes, at most 24 hours)', () => {
      it('defaults to 5 minutes', () => {
        given().when(create(base)).thenObject({ expires_at: '2026-06-01T10:05:00.000Z' });
      });
      it('accepts 24 hours and 60 seconds', () => {
        given()
          .when(create({ ...base, expires_in: 86400 }))
          .thenObject({ expires_at: '2026-06-02T10:00:00.000Z' });
        given()
          .when(create({ ...base, expires_in: 60 }))
          .thenObject({ expires_at: '2026-06-01T10:01:00.000Z' });
      });
      it.each([86401, 59, 0, 300.5])('refuses %p', (bad) => {
        given()
          .when(create({ ...base, expires_in: bad }))
          .thenError(invalid('expires_in'));
      });
    });

    describe('supported_chains (CAIP-2, eip155 only, supported chains only)', () => {
      it('defaults to every supported chain and keeps a given order', () => {
        given()
          .when(create({ ...base, supported_chains: ['eip155:8453', 'eip155:1'] }))
          .thenObject({ supported_chains: ['eip155:8453', 'eip155:1'] });
      });
      it.each([
        ['solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp', 'unsupported_chain_namespace'],
        ['eip155:56', 'unsupported_chain'],
        ['eip155:01', 'invalid_caip2'],
        ['8453', 'invalid_caip2'],
        ['', 'invalid_caip2'],
      ])('refuses %j (%s)', (chain, code) => {
        given()
          .when(create({ ...base, supported_chains: [chain] }))
          .thenError(invalid('supported_chains', code));
      });
      it('refuses duplicates and an empty list', () => {
        given()
          .when(create({ ...base, supported_chains: ['eip155:1', 'eip155:1'] }))
          .thenError(invalid('supported_chains', 'duplicate_chain'));
        given()
          .when(create({ ...base, supported_chains: [] }))
          .thenError(invalid('supported_chains'));
      });
    });

    describe('metadata (SPEC: string values of at most 500 characters)', () => {
      it('echoes string values, plan_name and plan_description included', () => {
        const metadata = { plan_name: 'Pro', plan_description: 'All features', order: '42' };
        given()
          .when(create({ ...base, metadata }))
          .thenObject({ metadata });
      });
      it('accepts 500 characters and refuses 501 (param metadata[<key>])', () => {
        given()
          .when(create({ ...base, metadata: { note: 'x'.repeat(500) } }))
          .thenObject({ metadata: { note: 'x'.repeat(500) } });
        given()
          .when(create({ ...base, metadata: { note: 'x'.repeat(501) } }))
          .thenError(invalid('metadata[note]'));
      });
      it('counts characters, not UTF-16 units', () => {
        given()
          .when(create({ ...base, metadata: { e: '😀'.repeat(500) } }))
          .thenObject({ metadata: { e: '😀'.repeat(500) } });
      });
      it('refuses non-string values (param metadata[<key>])', () => {
        given()
          .when(create({ ...base, metadata: { n: 5 } }))
          .thenError(invalid('metadata[n]'));
        given()
          .when(create({ ...base, metadata: { o: { nested: 'x' } } }))
          .thenError(invalid('metadata[o]'));
      });
      it('refuses more than 50 keys and keys longer than 40 characters', () => {
        const many = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v']));
        given()
          .when(create({ ...base, metadata: many }))
          .thenError(invalid('metadata'));
        given()
          .when(create({ ...base, metadata: { ['k'.repeat(41)]: 'v' } }))
          .thenError(invalid('metadata'));
      });
    });

    describe('other fields', () => {
      it('keeps redirect URLs verbatim, placeholders included', () => {
        const success_url = 'https://shop.example/thanks?schk={SUBSCRIPTION_CHECKOUT_ID}';
        given()
          .when(
            create({
              ...base,
              success_url,
              cancel_url: 'https://shop.example/c',
              return_url: 'http://localhost:8080/r',
              external_customer_id: 'cus_42',
            }),
          )
          .thenObject({
            success_url,
            cancel_url: 'https://shop.example/c',
            return_url: 'http://localhost:8080/r',
            external_customer_id: 'cus_42',
          });
      });
      it.each(['success_url', 'cancel_url', 'return_url'] as const)('refuses a bad %s', (param) => {
        for (const bad of [
          'not a url',
          'ftp://x.example/',
          'javascript:alert(1)',
          'https://u:p@x.example/',
          '',
        ]) {
          given()
            .when(create({ ...base, [param]: bad }))
            .thenError(invalid(param));
        }
      });
      it('refuses an empty or overlong external_customer_id', () => {
        given()
          .when(create({ ...base, external_customer_id: '' }))
          .thenError(invalid('external_customer_id'));
        given()
          .when(create({ ...base, external_customer_id: 'x'.repeat(256) }))
          .thenError(invalid('external_customer_id'));
      });
    });

    describe('currency rules (SPEC Rules 8)', () => {
      it('crypto-settled: a currency the rate source cannot quote is 422 price_currency_not_quotable', () => {
        given()
          .when(create({ ...base, price_currency: 'EUR' }, { quotedTokenSymbols: [] }))
          .thenError({ status: 422, type: 'cannot_process', code: 'price_currency_not_quotable' });
      });
      it('crypto-settled: quoted only against tokens none of the chosen chains offer is also not quotable', () => {
        given()
          .when(create({ ...base, supported_chains: ['eip155:8453'] }, { quotedTokenSymbols: ['USDT'] }))
          .thenError({ status: 422, code: 'price_currency_not_quotable' });
      });
      it('fiat-settled without a complete configuration is 422 fiat_settlement_required', () => {
        given()
          .when(create(base, { settlement: { mode: 'fiat', currency: null, complete: false } }))
          .thenError({ status: 422, code: 'fiat_settlement_required' });
        given()
          .when(create(base, { settlement: { mode: 'fiat', currency: 'ARS', complete: false } }))
          .thenError({ status: 422, code: 'fiat_settlement_required' });
      });
      it('fiat-settled pricing in another currency is 422 currency_mismatch', () => {
        given()
          .when(
            create(
              { ...base, price_currency: 'USD' },
              { settlement: { mode: 'fiat', currency: 'ARS', complete: true } },
            ),
          )
          .thenError({ status: 422, code: 'currency_mismatch', param: 'price_currency' });
      });
      it('fiat-settled in its own currency with a complete configuration is accepted', () => {
        given()
          .when(create(base, { settlement: { mode: 'fiat', currency: 'ARS', complete: true } }))
          .thenObject({ status: 'pending', price_currency: 'ARS' });
      });
      it('checks every 400 before any 422', () => {
        given()
          .when(create({ ...base, period_duration: 10 }, { quotedTokenSymbols: [] }))
          .thenError(invalid('period_duration'));
      });
      it('where managers are deployed, a merchant without a signer or a pauser is refused at creation (422), after the input rules', () => {
        given()
          .when(create(base, { merchantOnChain: { signer: false, pauser: true } }))
          .thenError({ status: 422, code: 'merchant_signer_required', param: 'merchant_signer' });
        given()
          .when(create(base, { merchantOnChain: { signer: false, pauser: false } }))
          .thenError({ status: 422, code: 'merchant_signer_required' });
        given()
          .when(create(base, { merchantOnChain: { signer: true, pauser: false } }))
          .thenError({ status: 422, code: 'merchant_pauser_required', param: 'merchant_pauser' });
        given()
          .when(
            create({ ...base, period_duration: 10 }, { merchantOnChain: { signer: false, pauser: false } }),
          )
          .thenError(invalid('period_duration'));
        given()
          .when(create(base, { merchantOnChain: { signer: true, pauser: true } }))
          .thenObject({ status: 'pending' });
      });
    });
  });

  describe('single-use state machine', () => {
    const created = createdEvent();
    const cancel = (
      by: 'merchant' | 'customer' = 'merchant',
      at = later(60_000),
    ): SubscriptionCheckoutCommand => ({ type: 'CancelSubscriptionCheckout', by, now: at });
    const expire = (at = later(300_000)): SubscriptionCheckoutCommand => ({
      type: 'ExpireSubscriptionCheckout',
      now: at,
    });
    const complete = (
      at = later(60_000),
    ): Extract<SubscriptionCheckoutCommand, { type: 'CompleteSubscriptionCheckout' }> => ({
      type: 'CompleteSubscriptionCheckout',
      subscriber: '0x1111111111111111111111111111111111111111',
      chain: 'eip155:8453',
      asset: 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
      txHash: null,
      now: at,
    });
    const after = (...commands: SubscriptionCheckoutCommand[]): SubscriptionCheckoutEvent[] => {
      let state = evolveSubscriptionCheckout(initialSubscriptionCheckoutState(), created);
      const events: SubscriptionCheckoutEvent[] = [created];
      for (const c of commands) {
        for (const e of decideSubscriptionCheckout(c, state)) {
          state = evolveSubscriptionCheckout(state, e);
          events.push(e);
        }
      }
      return events;
    };

    it('records who cancelled and when, and nothing else', () => {
      given(created)
        .when(cancel())
        .then([
          {
            type: 'SubscriptionCheckoutCancelled.v2',
            data: { by: 'merchant', cancelledAt: '2026-06-01T10:01:00.000Z' },
          },
        ]);
      given(created)
        .when(expire())
        .then([{ type: 'SubscriptionCheckoutExpired.v2', data: { expiredAt: '2026-06-01T10:05:00.000Z' } }]);
      given(created)
        .when(complete())
        .then([
          {
            type: 'SubscriptionCheckoutCompleted.v3',
            data: {
              subscriber: '0x1111111111111111111111111111111111111111',
              chain: 'eip155:8453',
              asset: 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
              txHash: null,
              completedAt: '2026-06-01T10:01:00.000Z',
              subscription: null,
              firstCharge: null,
            },
          },
        ]);
    });
    it('pending -> cancelled by the merchant', () => {
      given(created).when(cancel()).thenObject({
        status: 'cancelled',
        cancelled_at: '2026-06-01T10:01:00.000Z',
        updated_at: '2026-06-01T10:01:00.000Z',
        cancellation_reason: 'merchant_cancelled',
      });
    });
    it('pending -> cancelled by the customer dismissing the page', () => {
      given(created)
        .when(cancel('customer'))
        .thenObject({ status: 'cancelled', cancellation_reason: 'customer_dismissed' });
    });
    it('cancel only while pending: 409 subscription_checkout_not_pending', () => {
      given(...after(cancel()))
        .when(cancel())
        .thenError({ status: 409, code: 'subscription_checkout_not_pending' });
      given(...after(expire()))
        .when(cancel())
        .thenError({ status: 409, code: 'subscription_checkout_not_pending' });
      given(...after(complete()))
        .when(cancel())
        .thenError({ status: 409, code: 'subscription_checkout_not_pending' });
    });
    it('cannot be cancelled once expires_at passed, even before the timer recorded it', () => {
      given(created)
        .when(cancel('merchant', later(300_000)))
        .thenError({ status: 409, code: 'subscription_checkout_not_pending' });
    });
    it('pending -> expired once expires_at passes', () => {
      given(created).when(expire()).thenObject({ status: 'expired', expired_at: '2026-06-01T10:05:00.000Z' });
    });
    it('expiry is idempotent and never early', () => {
      given(created)
        .when(expire(later(299_999)))
        .then([]);
      given(...after(expire()))
        .when(expire(later(400_000)))
        .then([]);
      given(...after(cancel()))
        .when(expire())
        .then([]);
      given(...after(complete()))
        .when(expire())
        .then([]);
    });
    it('pending -> completed records the subscriber', () => {
      given(created).when(complete()).thenObject({
        status: 'completed',
        subscriber: '0x1111111111111111111111111111111111111111',
        completed_at: '2026-06-01T10:01:00.000Z',
      });
    });
    it('a late on-chain completion wins over cancelled or expired; completed happens once', () => {
      given(...after(expire()))
        .when(complete(later(400_000)))
        .thenObject({ status: 'completed', expired_at: '2026-06-01T10:05:00.000Z' });
      given(...after(cancel()))
        .when(complete())
        .thenObject({
          status: 'completed',
          cancelled_at: '2026-06-01T10:01:00.000Z',
          cancellation_reason: 'merchant_cancelled',
          updated_at: '2026-06-01T10:01:00.000Z',
        });
      given(...after(complete()))
        .when(complete())
        .then([]);
    });
    it('commands on an unknown intent are 404', () => {
      given().when(cancel()).thenError({ status: 404 });
      given().when(expire()).thenError({ status: 404 });
    });

    describe('a reorg takes out the subscribe transaction of a completion (docs/subscription-checkouts.md, Reorgs)', () => {
      const subscribeTx = `0x${'ab'.repeat(32)}`;
      const completeOnChain = (at = later(60_000)): SubscriptionCheckoutCommand => ({
        ...complete(at),
        txHash: subscribeTx,
      });
      const retract = (txHash = subscribeTx, at = later(90_000)): SubscriptionCheckoutCommand => ({
        type: 'RetractSubscriptionCheckoutCompletion',
        txHash,
        now: at,
      });

      it('given a completed intent, when its subscribe transaction is reorged out, then it is pending again as before the subscribe', () => {
        given(...after(completeOnChain()))
          .when(retract(subscribeTx.toUpperCase().replace('0X', '0x')))
          .then([
            {
              type: 'SubscriptionCheckoutCompletionRetracted.v1',
              data: { txHash: subscribeTx, retractedAt: '2026-06-01T10:01:30.000Z' },
            },
          ]);
        given(...after(completeOnChain()))
          .when(retract())
          .thenObject({
            status: 'pending',
            subscriber: null,
            completed_at: null,
            updated_at: '2026-06-01T10:01:30.000Z',
          });
      });

      it('given a late completion after expiry or cancel, when reorged out, then it is expired or cancelled again', () => {
        given(...after(expire(), completeOnChain(later(400_000))))
          .when(retract(subscribeTx, later(500_000)))
          .thenObject({ status: 'expired', expired_at: '2026-06-01T10:05:00.000Z', completed_at: null });
        given(...after(cancel(), completeOnChain()))
          .when(retract())
          .thenObject({ status: 'cancelled', cancellation_reason: 'merchant_cancelled', completed_at: null });
      });

      it('a retraction of another transaction, of an intent not completed, or a repeat records nothing', () => {
        given(...after(completeOnChain()))
          .when(retract(`0x${'cd'.repeat(32)}`))
          .then([]);
        given(created).when(retract()).then([]);
        given(...after(completeOnChain(), retract()))
          .when(retract())
          .then([]);
      });

      it('given the completion undone, when the same transaction is re-included, then it completes again (once)', () => {
        given(...after(completeOnChain(), retract()))
          .when(completeOnChain(later(120_000)))
          .thenObject({ status: 'completed', completed_at: '2026-06-01T10:02:00.000Z' });
        given(...after(completeOnChain(), retract(), completeOnChain(later(120_000))))
          .when(completeOnChain(later(130_000)))
          .then([]);
      });

      it('given the completion undone after expires_at, then the expiry timer expires the pending intent', () => {
        given(...after(completeOnChain(), retract(subscribeTx, later(350_000))))
          .when(expire(later(360_000)))
          .thenObject({ status: 'expired', expired_at: '2026-06-01T10:06:00.000Z' });
      });
    });
  });
});
