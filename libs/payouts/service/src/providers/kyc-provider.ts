import type { CustomerType, KycOutcome } from '@stablepay/payouts-domain';

/** What the KYC provider is given about a customer (the facts the merchant registered). */
export interface KycSubject {
  readonly customerId: string;
  readonly type: CustomerType;
  readonly name: string;
  readonly email: string;
  /** Whether this is a second attempt (after action_required). */
  readonly resubmission: boolean;
}

/**
 * Port: the KYC provider. `review` is called when the customer completes the hosted step of a session; `monitor`
 * after activation, for the provider's ongoing checks (a customer it suspends). Real providers plug in here.
 */
export interface KycProvider {
  review(subject: KycSubject): Promise<KycOutcome>;
  monitor(
    subject: KycSubject,
  ): Promise<{ readonly suspend: false } | { readonly suspend: true; readonly reason: string }>;
}

export const KYC_PROVIDER = Symbol('KYC_PROVIDER');

/**
 * The sandbox KYC provider (docs/payouts.md, "Sandbox magic values"), like card test modes: the customer's name or
 * email containing
 * - `kyc_failed`: the review rejects (`identity_not_verified`) -> kyc_failed;
 * - `action_required`: the first review asks for more (`document_unreadable`) -> action_required with a fresh
 *   kyc_url; the second review approves;
 * - `suspended`: approved, then suspended by the ongoing monitoring (`compliance_review`);
 * - anything else: approved -> active.
 */
export class SandboxKyc implements KycProvider {
  private static has(subject: KycSubject, magic: string): boolean {
    return subject.name.toLowerCase().includes(magic) || subject.email.includes(magic);
  }

  async review(subject: KycSubject): Promise<KycOutcome> {
    if (SandboxKyc.has(subject, 'kyc_failed'))
      return { outcome: 'rejected', reason: 'identity_not_verified' };
    if (SandboxKyc.has(subject, 'action_required') && !subject.resubmission)
      return { outcome: 'action_required', reason: 'document_unreadable' };
    return { outcome: 'approved' };
  }

  async monitor(subject: KycSubject) {
    return SandboxKyc.has(subject, 'suspended')
      ? ({ suspend: true, reason: 'compliance_review' } as const)
      : ({ suspend: false } as const);
  }
}
