import { DomainError } from '@stablepay/util';
import {
  chargeableAmount,
  convertAtRate,
  MAX_TOKEN_AMOUNT,
  type QuotedPlan,
  quoteBasis,
  rateFor,
  referenceQuoteExpiry,
  requireFiatPayoutDestination,
  requireFiatPricedForPriceLock,
} from './charge-quote';
import type { Rate } from './rates';

const fiatPlan: QuotedPlan = {
  subscriptionId: `0x${'5a'.repeat(32)}`,
  price: '150000',
  priceCurrency: 'ARS',
  tokenSymbol: 'USDC',
  tokenDecimals: 6,
};
const tokenPlan: QuotedPlan = { ...fiatPlan, price: '2500000', priceCurrency: null };
const rate = (value: string, tokenSymbol = 'USDC'): Rate => ({
  currency: 'ARS',
  tokenSymbol,
  value,
  asOf: '2026-06-01T10:00:00.000Z',
  source: 'sandbox',
});

function refusal(run: () => unknown): DomainError {
  try {
    run();
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('charge quote', () => {
  it('quotes the plan price of a fiat-priced plan in its currency', () => {
    expect(quoteBasis(fiatPlan, { fiatAmount: null, currency: null })).toEqual({
      kind: 'fiat',
      fiatAmount: 150000n,
      currency: 'ARS',
    });
  });

  it('converts an ad-hoc fiat amount of the body instead of the plan price', () => {
    expect(quoteBasis(fiatPlan, { fiatAmount: 999n, currency: 'ars' })).toEqual({
      kind: 'fiat',
      fiatAmount: 999n,
      currency: 'ARS',
    });
  });

  it('refuses an ad-hoc amount in another currency than the plan price (422 currency_mismatch)', () => {
    expect(refusal(() => quoteBasis(fiatPlan, { fiatAmount: 999n, currency: 'USD' }))).toMatchObject({
      status: 422,
      code: 'currency_mismatch',
      param: 'currency',
    });
  });

  it.each(['XYZ', 'DEM', 'JPY'])(
    'refuses %j as currency with 422 price_currency_not_quotable, on either plan (it was priced, or told it mismatched the plan)',
    (bad) => {
      for (const plan of [tokenPlan, fiatPlan])
        expect(refusal(() => quoteBasis(plan, { fiatAmount: 1000n, currency: bad }))).toMatchObject({
          status: 422,
          type: 'cannot_process',
          code: 'price_currency_not_quotable',
          param: 'currency',
        });
    },
  );

  it('refuses a currency that is not three letters with 400 on currency', () => {
    expect(refusal(() => quoteBasis(tokenPlan, { fiatAmount: 1000n, currency: 'US$' }))).toMatchObject({
      status: 400,
      type: 'validation_error',
      param: 'currency',
    });
  });

  it('quotes a token-priced plan in tokens, and an ad-hoc fiat amount only with its currency', () => {
    expect(quoteBasis(tokenPlan, { fiatAmount: null, currency: null })).toEqual({
      kind: 'token',
      tokenAmount: 2500000n,
    });
    expect(quoteBasis(tokenPlan, { fiatAmount: 1000n, currency: 'USD' })).toEqual({
      kind: 'fiat',
      fiatAmount: 1000n,
      currency: 'USD',
    });
    expect(refusal(() => quoteBasis(tokenPlan, { fiatAmount: 1000n, currency: null }))).toMatchObject({
      status: 400,
      param: 'currency',
    });
  });

  it('takes a price lock only for a fiat-priced plan: a token-priced one is refused with 422 currency_mismatch on currency', () => {
    expect(() => requireFiatPricedForPriceLock(fiatPlan)).not.toThrow();
    expect(refusal(() => requireFiatPricedForPriceLock(tokenPlan))).toMatchObject({
      status: 422,
      type: 'cannot_process',
      code: 'currency_mismatch',
      param: 'currency',
    });
  });

  it('refuses a zero fiat amount', () => {
    expect(refusal(() => quoteBasis(fiatPlan, { fiatAmount: 0n, currency: null }))).toMatchObject({
      param: 'fiat_amount',
    });
  });

  it('refuses a fiat amount whose token amount no charge could carry (over 2^256 - 1), naming fiat_amount', () => {
    expect(chargeableAmount(MAX_TOKEN_AMOUNT, 'USDC')).toBe(MAX_TOKEN_AMOUNT);
    const huge = convertAtRate(10n ** 77n, 'ARS', rate('1185.50'), 6);
    expect(huge > MAX_TOKEN_AMOUNT).toBe(true);
    expect(refusal(() => chargeableAmount(huge, 'USDC'))).toMatchObject({
      status: 400,
      type: 'validation_error',
      param: 'fiat_amount',
    });
  });

  it('converts at one rate rounding up: 1,500.00 ARS at 1,185.50 ARS/USDC is 1.265289 USDC', () => {
    expect(convertAtRate(150000n, 'ARS', rate('1185.50'), 6)).toBe(1265289n);
    expect(convertAtRate(150000n, 'ARS', rate('1185.50'), 18)).toBe(1265288907633909743n);
  });

  it("picks the rate of the subscription's token, 422 price_currency_not_quotable without one", () => {
    expect(rateFor([rate('1', 'USDT'), rate('2')], 'ARS', 'usdc').value).toBe('2');
    expect(refusal(() => rateFor([rate('1', 'USDT')], 'ARS', 'USDC'))).toMatchObject({
      code: 'price_currency_not_quotable',
    });
  });

  it('keeps a reference quote valid 120 seconds', () => {
    expect(referenceQuoteExpiry(new Date('2026-06-01T10:00:00.000Z')).toISOString()).toBe(
      '2026-06-01T10:02:00.000Z',
    );
  });
});

describe('requireFiatPayoutDestination (a price lock or a subscribe needs somewhere to pay out, in its currency)', () => {
  it('refuses an incomplete fiat settlement configuration with 422 fiat_settlement_required', () => {
    for (const settlement of [
      { complete: false, currency: 'ARS' },
      { complete: false, currency: null },
    ])
      expect(() => requireFiatPayoutDestination(settlement, 'ARS')).toThrow(
        expect.objectContaining({ status: 422, code: 'fiat_settlement_required' }),
      );
  });

  it('refuses a price in another currency than the configuration pays out in with 422 currency_mismatch', () => {
    expect(() => requireFiatPayoutDestination({ complete: true, currency: 'USD' }, 'ARS')).toThrow(
      expect.objectContaining({
        status: 422,
        type: 'cannot_process',
        code: 'currency_mismatch',
        message: expect.stringContaining('settles in USD'),
      }),
    );
    let thrown: unknown;
    try {
      requireFiatPayoutDestination({ complete: true, currency: 'USD' }, 'EUR', 'currency');
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toMatchObject({ code: 'currency_mismatch', param: 'currency' });
  });

  it('lets a complete configuration in the price currency through', () => {
    expect(() => requireFiatPayoutDestination({ complete: true, currency: 'ARS' }, 'ARS')).not.toThrow();
  });
});
