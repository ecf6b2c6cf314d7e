import { getAddress } from 'ethers';

export type ScreeningResult =
  | { readonly kind: 'clear' }
  | { readonly kind: 'match'; readonly address: string }
  | { readonly kind: 'unreachable' };

/**
 * The sanctions screening port, shared by the scopes that screen chain addresses: payments screen every sender of a
 * payment's token before its deposit is deployed; subscriptions screen the subscriber at subscribe and the new wallet
 * of a migration. Adapters are passed in by the composition roots; the sandbox below is the default.
 */
export interface SanctionsScreening {
  screen(addresses: readonly string[]): Promise<ScreeningResult>;
}

export const SANCTIONS_SCREENING = Symbol('SANCTIONS_SCREENING');

/**
 * How long a bus consumer retries one message whose screening found the provider `unreachable` as an outage (in
 * place, the bus's short back-off, never parked) before it lets the message be parked (retried from 60 s up to every
 * 30 min): a provider down for everyone is usually back within it, and one refusing a single address for good holds
 * the consumer's other messages for this long once, not forever (OutageGrace, @stablepay/event-bus).
 */
export const SCREENING_OUTAGE_GRACE_MS = 5 * 60_000;

/**
 * Sandbox magic addresses (documented in docs/payment-deposits.md and docs/subscriptions.md). They are anvil's well-known dev accounts
 * 9 and 7, so a test or a demo can pay from them on a local chain.
 * - MATCH: screening reports a sanctions match (the payment is flagged, for good).
 * - UNREACHABLE: the provider is unreachable for the first SANDBOX_UNREACHABLE_ATTEMPTS screenings of that
 *   address in this process, then answers clear.
 */
export const SANDBOX_SANCTIONED_PAYER = '0xa0Ee7A142d267C1f36714E4a8F75612F20a79720';
export const SANDBOX_UNREACHABLE_PAYER = '0x14dC79964da2C08b23698B3D3cc7Ca32193d9955';
export const SANDBOX_UNREACHABLE_ATTEMPTS = 2;

export class SandboxSanctionsScreening implements SanctionsScreening {
  private readonly attempts = new Map<string, number>();

  screen(addresses: readonly string[]): Promise<ScreeningResult> {
    const normalised = addresses.map((a) => getAddress(a));
    const match = normalised.find((a) => a === SANDBOX_SANCTIONED_PAYER);
    if (match) return Promise.resolve({ kind: 'match', address: match });
    if (normalised.includes(SANDBOX_UNREACHABLE_PAYER)) {
      const seen = (this.attempts.get(SANDBOX_UNREACHABLE_PAYER) ?? 0) + 1;
      this.attempts.set(SANDBOX_UNREACHABLE_PAYER, seen);
      if (seen <= SANDBOX_UNREACHABLE_ATTEMPTS) return Promise.resolve({ kind: 'unreachable' });
      this.attempts.delete(SANDBOX_UNREACHABLE_PAYER);
    }
    return Promise.resolve({ kind: 'clear' });
  }
}
