import {
  CHARGE_PREFLIGHT_ERRORS,
  type ChargePreflightInput,
  chargePreflight,
  type ChargeQuote,
  type ChargeRequest,
  ZERO_QUOTE_HASH,
} from './charge-preflight';
import { decideSubscription, initialSubscriptionState, succeededChargeId } from './subscription';
import type { SubscriptionEvent } from './subscription.events';
import {
  CHAIN,
  chargeLog,
  createdData,
  PERIOD,
  START,
  stateOf,
  SUB_ID,
  subscribed,
  subscribedEvents,
  tx,
} from './subscription.test-fixtures';

const now = new Date('2026-06-01T10:00:00.000Z');
const QUOTE_HASH = `0x${'9f'.repeat(32)}`;
const chainNow = START + 3600n;

const quote = (over: Partial<ChargeQuote> = {}): ChargeQuote => ({
  code: 'refq_01abc',
  kind: 'reference',
  subscriptionId: SUB_ID,
  tokenAmount: 2_000_000n,
  quoteHash: QUOTE_HASH,
  expiresAt: new Date(now.getTime() + 60_000),
  usedByChargeId: null,
  fiatCurrency: 'ARS',
  fiatAmount: '150000',
  ...over,
});
/** A fiat-settled business paying out in ARS, as the plan and its price locks are priced. */
const FIAT_ARS = { mode: 'fiat', currency: 'ARS', complete: true } as const;

const request = (over: Partial<ChargeRequest> = {}): ChargeRequest => ({
  subscriptionId: SUB_ID,
  amount: 2_000_000n,
  nonce: 1,
  deadline: chainNow + 600n,
  quoteHash: QUOTE_HASH,
  quoteCode: 'refq_01abc',
  ...over,
});

/** given the subscription's events, when the charge request arrives, then the preflight answers. */
function given(...events: SubscriptionEvent[]) {
  const state = stateOf(events);
  return {
    when: (over: Partial<Omit<ChargePreflightInput, 'state'>> = {}) => {
      const result = chargePreflight({
        state,
        request: request(),
        quote: quote(),
        signatureValid: true,
        chainNow,
        now,
        settlement: FIAT_ARS,
        ...over,
      });
      return {
        thenOk: () => expect(result).toEqual({ outcome: 'ok' }),
        thenRejected: (code: keyof typeof CHARGE_PREFLIGHT_ERRORS) =>
          expect(result).toMatchObject({ outcome: 'rejected', code, ...CHARGE_PREFLIGHT_ERRORS[code] }),
        result,
      };
    },
  };
}

const after = (...commands: Parameters<typeof decideSubscription>[0][]) =>
  commands.reduce<SubscriptionEvent[]>(
    (events, command) => [...events, ...decideSubscription(command, stateOf(events))],
    [],
  );

describe('charge preflight (SPEC Errors > charge preflight, Subscriptions > Charge behavior rule 2)', () => {
  it('a signed charge within cap and budget with a live quote passes', () => {
    given(...subscribedEvents())
      .when()
      .thenOk();
  });

  it('subscription_cancelled for a cancelling subscription (no further charges eligible) and a cancelled one', () => {
    const cancelling = after(subscribed, { type: 'ConfirmCancel', by: 'merchant', txHash: tx(9), now });
    given(...cancelling)
      .when()
      .thenRejected('subscription_cancelled');
    const cancelled = after(subscribed, {
      type: 'RecordCancelled',
      by: 'subscriber',
      txHash: tx(9),
      cancelledAt: now.toISOString(),
    });
    given(...cancelled)
      .when()
      .thenRejected('subscription_cancelled');
  });

  it('amount_exceeds_cap when amount > cap_amount (cap and budget rule 1)', () => {
    given(...subscribedEvents())
      .when({
        request: request({ amount: 10_000_001n }),
        quote: quote({ tokenAmount: 10_000_001n }),
      })
      .thenRejected('amount_exceeds_cap');
    given(...subscribedEvents())
      .when({ request: request({ amount: 10_000_000n }), quote: quote({ tokenAmount: 10_000_000n }) })
      .thenOk();
  });

  it('budget_exceeded when the charge would push spent_this_period past budget (rule 2), exactly the remainder passes', () => {
    // budget 25 USDC, 5 spent by the first charge, then 10 + 8 more in the same window: 2 left.
    const spent = after(
      subscribed,
      {
        type: 'RecordChargeSucceeded',
        charge: chargeLog(1, 10_000_000n, 60n, 15_000_000n),
        writtenBy: 'api',
      },
      {
        type: 'RecordChargeSucceeded',
        charge: chargeLog(2, 8_000_000n, 120n, 23_000_000n),
        writtenBy: 'api',
      },
    );
    const at = (amount: bigint) => ({
      request: request({ amount, nonce: 3 }),
      quote: quote({ tokenAmount: amount }),
    });
    given(...spent)
      .when(at(2_000_001n))
      .thenRejected('budget_exceeded');
    given(...spent)
      .when(at(2_000_000n))
      .thenOk();
  });

  it('the budget resets at the window boundary anchored at the on-chain start (rule 3), in chain time', () => {
    const spent = after(subscribed, {
      type: 'RecordChargeSucceeded',
      charge: chargeLog(1, 10_000_000n, BigInt(PERIOD) - 100n, 15_000_000n),
      writtenBy: 'api',
    });
    const tenMore = {
      request: request({ amount: 10_000_000n, nonce: 2 }),
      quote: quote({ tokenAmount: 10_000_000n }),
    };
    // 15 spent of 25: 10 fits (cap), 10 again after the boundary also fits, though last_charged_at was 100 s ago.
    given(...spent)
      .when({
        ...tenMore,
        chainNow: START + BigInt(PERIOD) - 1n,
        request: { ...tenMore.request, deadline: START + BigInt(PERIOD) + 600n },
      })
      .thenOk();
    const spentMore = after(
      subscribed,
      {
        type: 'RecordChargeSucceeded',
        charge: chargeLog(1, 10_000_000n, BigInt(PERIOD) - 100n, 15_000_000n),
        writtenBy: 'api',
      },
      {
        type: 'RecordChargeSucceeded',
        charge: chargeLog(2, 10_000_000n, BigInt(PERIOD) - 50n, 25_000_000n),
        writtenBy: 'api',
      },
    );
    const third = { request: request({ amount: 1n, nonce: 3 }), quote: quote({ tokenAmount: 1n }) };
    given(...spentMore)
      .when({
        ...third,
        chainNow: START + BigInt(PERIOD) - 1n,
        request: { ...third.request, deadline: START + BigInt(PERIOD) + 600n },
      })
      .thenRejected('budget_exceeded');
    given(...spentMore)
      .when({
        ...third,
        chainNow: START + BigInt(PERIOD),
        request: { ...third.request, deadline: START + BigInt(PERIOD) + 600n },
      })
      .thenOk();
  });

  it('missing_budget_state while the first charge (its window state) is not recorded yet', () => {
    const createdOnly = decideSubscription({ ...subscribed, firstCharge: null }, initialSubscriptionState());
    given(...createdOnly)
      .when({ request: request({ nonce: 0 }) })
      .thenRejected('missing_budget_state');
  });

  describe('quote binding errors', () => {
    it('quote_required: a fiat-priced plan charges with a quote', () => {
      given(...subscribedEvents())
        .when({ request: request({ quoteCode: null, quoteHash: ZERO_QUOTE_HASH }), quote: null })
        .thenRejected('quote_required');
    });

    it('a token-priced (legacy) plan charges without a quote, with a zero quoteHash only', () => {
      const legacy = after({
        ...subscribed,
        type: 'RecordSubscriptionCreated',
        subscription: { ...createdData, price: '5000000', priceCurrency: null },
      });
      given(...legacy)
        .when({ request: request({ quoteCode: null, quoteHash: ZERO_QUOTE_HASH }), quote: null })
        .thenOk();
      given(...legacy)
        .when({ request: request({ quoteCode: null }), quote: null })
        .thenRejected('quote_hash_mismatch');
    });

    it('quote_not_found for an unknown code (or another merchant’s)', () => {
      given(...subscribedEvents())
        .when({ quote: null })
        .thenRejected('quote_not_found');
    });

    it('quote_subscription_mismatch for a quote of another subscription', () => {
      given(...subscribedEvents())
        .when({ quote: quote({ subscriptionId: `0x${'77'.repeat(32)}` }) })
        .thenRejected('quote_subscription_mismatch');
    });

    it('quote_amount_mismatch for another amount', () => {
      given(...subscribedEvents())
        .when({ quote: quote({ tokenAmount: 1_999_999n }) })
        .thenRejected('quote_amount_mismatch');
    });

    it('quote_hash_mismatch when the signature names another quote', () => {
      given(...subscribedEvents())
        .when({ request: request({ quoteHash: `0x${'01'.repeat(32)}` }) })
        .thenRejected('quote_hash_mismatch');
    });

    it('quote_already_used for a quote that paid a charge', () => {
      given(...subscribedEvents())
        .when({ quote: quote({ usedByChargeId: 'subc_x' }) })
        .thenRejected('quote_already_used');
    });

    it('quote_already_used for a quote a recorded charge of the subscription carries, before the quote store records the use', () => {
      const paid = after(subscribed, {
        type: 'RecordChargeSucceeded',
        charge: {
          ...chargeLog(1, 2_000_000n, 60n, 7_000_000n),
          quoteHash: QUOTE_HASH.toUpperCase().replace('0X', '0x'),
        },
        writtenBy: 'api',
      });
      const result = given(...paid).when({ request: request({ nonce: 2 }) });
      result.thenRejected('quote_already_used');
      expect(result.result).toMatchObject({
        message: expect.stringContaining(succeededChargeId(CHAIN, SUB_ID, 1)),
      });
    });

    it('quote_expired at and after its expiry (a reference quote lives 120 s; a price lock until its own expiry)', () => {
      given(...subscribedEvents())
        .when({ quote: quote({ expiresAt: now }) })
        .thenRejected('quote_expired');
      given(...subscribedEvents())
        .when({
          quote: quote({ kind: 'price_lock', code: 'plk_1', expiresAt: new Date(now.getTime() - 1) }),
          request: request({ quoteCode: 'plk_1' }),
        })
        .thenRejected('quote_expired');
    });

    describe('a price lock issued before the settlement configuration changed (SPEC Rules 8 at charge time)', () => {
      const lock = {
        quote: quote({ kind: 'price_lock', code: 'plk_1' }),
        request: request({ quoteCode: 'plk_1' }),
      };

      it('redeems a lock the configuration still pays out', () => {
        given(...subscribedEvents())
          .when({ ...lock, settlement: FIAT_ARS })
          .thenOk();
      });

      it('fiat_settlement_required once the fiat configuration was removed or emptied', () => {
        for (const settlement of [
          { mode: 'fiat', currency: null, complete: false },
          { mode: 'fiat', currency: 'ARS', complete: false },
        ] as const) {
          const result = given(...subscribedEvents()).when({ ...lock, settlement });
          result.thenRejected('fiat_settlement_required');
          expect(result.result).toMatchObject({ status: 422, type: 'cannot_process', param: 'quote_code' });
        }
      });

      it('fiat_settlement_required once the business settles in crypto (no fiat payout to redeem the lock into)', () => {
        given(...subscribedEvents())
          .when({ ...lock, settlement: { mode: 'crypto' } })
          .thenRejected('fiat_settlement_required');
      });

      it('currency_mismatch once the configuration pays out in another currency (ARS lock, USD payouts)', () => {
        const result = given(...subscribedEvents()).when({
          ...lock,
          settlement: { mode: 'fiat', currency: 'USD', complete: true },
        });
        result.thenRejected('currency_mismatch');
        expect(result.result).toMatchObject({ message: expect.stringContaining('settles in USD') });
      });

      it('an expired or used lock is refused for that first (the quote checks keep their order)', () => {
        given(...subscribedEvents())
          .when({
            ...lock,
            quote: quote({ kind: 'price_lock', code: 'plk_1', expiresAt: now }),
            settlement: { mode: 'crypto' },
          })
          .thenRejected('quote_expired');
      });

      it('currency_mismatch (param quote_code) for a lock on a token-priced plan taken before the quote call refused one: its charge would settle no fiat', () => {
        const legacy = after({
          ...subscribed,
          type: 'RecordSubscriptionCreated',
          subscription: { ...createdData, price: '5000000', priceCurrency: null },
        });
        // An ad-hoc fiat_amount in the settlement currency itself, still live and unused.
        const result = given(...legacy).when({ ...lock, settlement: FIAT_ARS });
        result.thenRejected('currency_mismatch');
        expect(result.result).toMatchObject({
          status: 422,
          type: 'cannot_process',
          param: 'quote_code',
          message: expect.stringContaining('token units'),
        });
        // Its reference quote (a crypto-settled business's ad-hoc amount) still charges: nothing is paid out.
        given(...legacy)
          .when({ settlement: { mode: 'crypto' } })
          .thenOk();
      });

      it('a reference quote is not a lock: a configuration change does not refuse it', () => {
        given(...subscribedEvents())
          .when({ settlement: { mode: 'fiat', currency: 'USD', complete: true } })
          .thenOk();
      });
    });
  });

  describe('signature failures', () => {
    it('invalid_signature when the service’s EIP-712 check failed (wrong signer, stale epoch, other terms)', () => {
      given(...subscribedEvents())
        .when({ signatureValid: false })
        .thenRejected('invalid_signature');
    });

    it('signature_expired when the deadline is before chain time; signature_deadline_too_far past 7 days', () => {
      given(...subscribedEvents())
        .when({ request: request({ deadline: chainNow - 1n }) })
        .thenRejected('signature_expired');
      given(...subscribedEvents())
        .when({ request: request({ deadline: chainNow + 7n * 86_400n + 1n }) })
        .thenRejected('signature_deadline_too_far');
      given(...subscribedEvents())
        .when({ request: request({ deadline: chainNow + 7n * 86_400n }) })
        .thenOk();
    });

    it('nonce_mismatch for a nonce ahead of charge_nonce', () => {
      given(...subscribedEvents())
        .when({ request: request({ nonce: 2 }) })
        .thenRejected('nonce_mismatch');
    });

    it('invalid_amount for zero', () => {
      given(...subscribedEvents())
        .when({ request: request({ amount: 0n }), quote: quote({ tokenAmount: 0n }) })
        .thenRejected('invalid_amount');
    });
  });

  describe('a used nonce: the merchant retries a charge that landed', () => {
    const landed = after(subscribed, {
      type: 'RecordChargeReverted',
      chargeId: 'subc_ours',
      nonce: 1,
      amount: '2000000',
      txHash: tx(778),
      failureReason: 'NonceAlreadyUsed',
      stage: 'receipt',
      landed: { ...chargeLog(1, 2_000_000n, 60n, 7_000_000n, 777), quoteHash: QUOTE_HASH },
      now,
    });

    it('the same charge again is answered with the charge that landed: nothing submitted, nothing charged twice', () => {
      expect(
        given(...landed).when({ quote: quote({ usedByChargeId: succeededChargeId(CHAIN, SUB_ID, 1) }) })
          .result,
      ).toEqual({
        outcome: 'already_charged',
        chargeId: succeededChargeId(CHAIN, SUB_ID, 1),
        txHash: tx(777),
      });
    });

    it('the same nonce for another amount is nonce_already_used, even on a cancelled subscription', () => {
      const cancelled = [
        ...landed,
        ...decideSubscription(
          { type: 'RecordCancelled', by: 'merchant', txHash: tx(9), cancelledAt: now.toISOString() },
          stateOf(landed),
        ),
      ];
      given(...cancelled)
        .when({ request: request({ amount: 1_000_000n }) })
        .thenRejected('nonce_already_used');
    });
  });

  it('the status table lists every code as a 4xx', () => {
    for (const { status } of Object.values(CHARGE_PREFLIGHT_ERRORS)) {
      expect(status).toBeGreaterThanOrEqual(400);
      expect(status).toBeLessThan(500);
    }
  });

  it('a rejection is a value: preflight never changes the state it read (SPEC fiat field rule 7)', () => {
    const state = stateOf(subscribedEvents());
    const snapshot = () =>
      JSON.stringify(state, (_key, v: unknown) =>
        typeof v === 'bigint' ? v.toString() : v instanceof Map || v instanceof Set ? [...v] : v,
      );
    const before = snapshot();
    const result = chargePreflight({
      state,
      request: request({ amount: 99_000_000n }),
      quote: quote(),
      signatureValid: true,
      chainNow,
      now,
      settlement: FIAT_ARS,
    });
    expect(result.outcome).toBe('rejected');
    expect(snapshot()).toBe(before);
  });
});
