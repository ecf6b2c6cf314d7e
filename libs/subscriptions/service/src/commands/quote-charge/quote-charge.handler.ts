import { randomBytes } from 'node:crypto';
import { Controller, Inject, Logger } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CLOCK, EVENT_STORE } from '@stablepay/aggregate';
import { CommandHandler } from '@stablepay/commands';
import type { EventStore } from '@stablepay/event-store';
import { quoteHash } from '@stablepay/evm';
import { type QuoteChargeCommand, SUBSCRIPTION_CHARGE_COMMANDS } from '@stablepay/subscriptions-api';
import {
  type ChargeQuoteObject,
  chargeableAmount,
  convertAtRate,
  quoteBasis,
  type RateSource,
  rateFor,
  REFERENCE_QUOTE_PREFIX,
  referenceQuoteExpiry,
  requireFiatPayoutDestination,
  requireFiatPricedForPriceLock,
  requireQuotableUnderCap,
} from '@stablepay/subscriptions-domain';
import { type Clock, conflict } from '@stablepay/util';
import { ChargeQuotes } from '../../charges/charge-quotes';
import { loadOwnedSubscription } from '../../charges/owned-subscription';
import { SETTLEMENT_PROVIDER, type SettlementProvider } from '../../charges/settlement-provider';
import { RATE_SOURCE } from '../../rates/rate-source.token';
import { MerchantProfiles } from '../../subscription-checkouts/merchant-profiles';

/**
 * Use case: quote the next charge (POST /subscriptions/:id/charge-quote), in the owning service. A crypto-settled
 * business gets a reference quote (`refq_...`, 120 s) at the live rate; a fiat-settled one the settlement provider's
 * price lock. The quote is stored so the charge preflight can bind the signature, the amount and the subscription to
 * it; nothing is appended to the subscription (a quote is an offer, not a fact of the subscription).
 */
@Controller()
export class QuoteChargeHandler {
  private readonly logger = new Logger('subscription-charge-quotes');

  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(MerchantProfiles) private readonly profiles: MerchantProfiles,
    @Inject(RATE_SOURCE) private readonly rates: RateSource,
    @Inject(SETTLEMENT_PROVIDER) private readonly provider: SettlementProvider,
    @Inject(ChargeQuotes) private readonly quotes: ChargeQuotes,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  @CommandHandler(SUBSCRIPTION_CHARGE_COMMANDS.quote)
  async handle(@Payload() command: QuoteChargeCommand): Promise<ChargeQuoteObject> {
    const { state } = await loadOwnedSubscription(this.store, command.merchant, command.subscriptionId);
    const c = state.created;
    if (state.status !== 'active')
      throw conflict(
        'subscription_cancelled',
        `Subscription ${c.subscriptionId} is ${state.status}: no charge is eligible.`,
      );
    const basis = quoteBasis(c, {
      fiatAmount: command.fiatAmount === null ? null : BigInt(command.fiatAmount),
      currency: command.currency,
    });
    const fiatAmountGiven = command.fiatAmount !== null;
    const profile = await this.profiles.get(command.merchant.merchantId);
    const now = this.clock.now();
    let code: string;
    let amount: bigint;
    let rate: string | null = null;
    let expiresAt: Date;
    let priceLock = false;
    if (basis.kind === 'fiat' && profile.settlement.mode === 'fiat') {
      requireFiatPricedForPriceLock(c);
      requireFiatPayoutDestination(profile.settlement, basis.currency);
      // At the live rate first: an amount over the cap is refused without holding a price lock at the provider. The
      // rate source is not the provider, so its failure does not fail the quote: the lock's own amount is checked too.
      const live = await this.liveTokenAmount(basis, c).catch(() => null);
      if (live !== null)
        requireQuotableUnderCap(chargeableAmount(live.amount, c.tokenSymbol), state.cap, fiatAmountGiven);
      const lock = await this.provider.lockPrice({
        merchantId: command.merchant.merchantId,
        fiatAmount: basis.fiatAmount,
        currency: basis.currency,
        tokenSymbol: c.tokenSymbol,
        tokenDecimals: c.tokenDecimals,
        chain: c.chain,
      });
      ({ priceLockCode: code, rate, expiresAt } = lock);
      // Checked in the try below, which gives the lock back on a refusal: a lock converting past what a charge can
      // carry (the rate source down, so the live check above did not run) was a 400 that left the lock held.
      amount = lock.tokenAmount;
      priceLock = true;
    } else {
      // Crypto-settled, or a token price quoted as is (nothing to convert, so nothing for a provider to lock).
      if (basis.kind === 'fiat') {
        const live = await this.liveTokenAmount(basis, c);
        amount = chargeableAmount(live.amount, c.tokenSymbol);
        rate = live.rate;
      } else {
        amount = basis.tokenAmount;
      }
      code = `${REFERENCE_QUOTE_PREFIX}${randomBytes(12).toString('hex')}`;
      expiresAt = referenceQuoteExpiry(now);
    }
    try {
      // The amount quoted (the provider's lock may convert at a rate a little off the live one, and with the rate
      // source down it is the only check).
      if (priceLock) amount = chargeableAmount(amount, c.tokenSymbol);
      requireQuotableUnderCap(amount, state.cap, fiatAmountGiven);
      const quote: ChargeQuoteObject = {
        object: 'subscription_charge_quote',
        quote_code: code,
        kind: priceLock ? 'price_lock' : 'reference_quote',
        price_lock_code: priceLock ? code : null,
        subscription_id: c.subscriptionId,
        amount: amount.toString(),
        token_symbol: c.tokenSymbol,
        token_decimals: c.tokenDecimals,
        fiat_amount: basis.kind === 'fiat' ? basis.fiatAmount.toString() : null,
        fiat_currency: basis.kind === 'fiat' ? basis.currency : null,
        rate,
        quote_hash: quoteHash(code),
        expires_at: expiresAt.toISOString(),
        created_at: now.toISOString(),
      };
      await this.quotes.issue(command.merchant, quote);
      return quote;
    } catch (error) {
      // A lock the merchant never receives would otherwise stay held at the provider until it expires.
      if (priceLock) await this.releasePriceLock(command.merchant.merchantId, code);
      throw error;
    }
  }

  /** Best effort: a provider that cannot release now lets the lock expire; the quote's own refusal is the answer. */
  private async releasePriceLock(merchantId: string, priceLockCode: string): Promise<void> {
    try {
      await this.provider.releasePriceLock({ merchantId, priceLockCode });
    } catch (error) {
      this.logger.warn(
        `price lock ${priceLockCode} of merchant ${merchantId} not released (it expires on its own): ${
          error instanceof Error ? error.message : String(error)
        }`,
      );
    }
  }

  /** A fiat amount in the subscription's token at the live rate, rounding up (convertAtRate). */
  private async liveTokenAmount(
    basis: { readonly fiatAmount: bigint; readonly currency: string },
    plan: { readonly tokenSymbol: string; readonly tokenDecimals: number },
  ): Promise<{ amount: bigint; rate: string }> {
    const live = rateFor(await this.rates.quote(basis.currency), basis.currency, plan.tokenSymbol);
    return {
      amount: convertAtRate(basis.fiatAmount, basis.currency, live, plan.tokenDecimals),
      rate: live.value,
    };
  }
}
