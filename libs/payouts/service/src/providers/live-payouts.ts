import { DomainError } from '@stablepay/util';

/** True when the deployment plugged in real KYC and off-ramp adapters (payoutsService(config, { kyc, offRamp })). */
export const PAYOUTS_LIVE_PROVIDERS = Symbol('PAYOUTS_LIVE_PROVIDERS');

/**
 * The sandboxes approve every KYC and "pay" every payout without moving fiat: right for test mode, and a silent loss
 * in live mode (a live customer's crypto would be swept to the off-ramp for a payout that never reaches a bank). So a
 * live-mode customer or payout needs real providers; without them it is refused before anything is recorded.
 */
export function requireLivePayoutProviders(mode: string, liveProviders: boolean): void {
  if (mode !== 'live' || liveProviders) return;
  throw new DomainError({
    type: 'invalid_request',
    status: 403,
    code: 'live_payouts_unavailable',
    message:
      'Payouts in live mode need a real KYC and off-ramp provider, and this deployment has only the sandbox ones. Use a test-mode key, or ask Stablepay to connect the providers.',
  });
}
