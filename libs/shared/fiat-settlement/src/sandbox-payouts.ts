import { ConfigError, envInt, envOptional } from '@stablepay/util';
import type { SettlementReportKind } from './fiat-settlement';

/** One step of a sandbox payout: the reports the sandbox provider sends once `afterDelays` delays have passed. */
export interface SandboxPayoutStep {
  readonly afterDelays: number;
  readonly kinds: readonly SettlementReportKind[];
}

/**
 * Magic amounts in minor units of the fiat currency (a charge's `fiat_amount`; a payment's order amount in cents)
 * that pick how the sandbox provider pays out, as test card numbers do elsewhere (docs/subscriptions.md, "Sandbox
 * payouts"; docs/payments.md, "Fiat settlement"). Any other amount completes.
 */
export const SANDBOX_PAYOUT_REJECTED = '402';
export const SANDBOX_PAYOUT_NEVER_CREDITED = '404';
export const SANDBOX_PAYOUT_LATE = '408';

/** What the sandbox provider reports about a payout of this amount (minor units), step by step (one delay per step). */
export function sandboxPayoutScript(minorAmount: string): readonly SandboxPayoutStep[] {
  switch (minorAmount) {
    case SANDBOX_PAYOUT_REJECTED:
      return [{ afterDelays: 1, kinds: ['deposit_credited', 'payout_rejected'] }];
    case SANDBOX_PAYOUT_NEVER_CREDITED:
      // Nothing: SPEC's deadlines take over (delayed deposit_not_credited at six hours, failed at 72).
      return [];
    case SANDBOX_PAYOUT_LATE:
      return [
        { afterDelays: 1, kinds: ['deposit_credited', 'withdraw_started', 'withdraw_failed'] },
        { afterDelays: 2, kinds: ['payout_completed'] },
      ];
    default:
      return [{ afterDelays: 1, kinds: ['deposit_credited', 'withdraw_started', 'payout_completed'] }];
  }
}

export interface SandboxSettlementConfig {
  /**
   * How long after a test-mode payout starts the sandbox settlement provider reports on it
   * (SANDBOX_SETTLEMENT_DELAY_MS, default 10 s of the service clock; `off`: the sandbox reports nothing on its own).
   */
  readonly sandboxSettlementDelayMs: number | null;
  /** How often (real time) the sandbox looks for payouts due (SANDBOX_SETTLEMENT_POLL_MS, default 1000). */
  readonly sandboxSettlementPollMs: number;
}

export const DEFAULT_SANDBOX_SETTLEMENT_DELAY_MS = 10_000;

/** The sandbox provider's timing, one setting for every owner of payouts (charges and payments). */
export function sandboxSettlementConfigFromEnv(
  env: Record<string, string | undefined>,
): SandboxSettlementConfig {
  const raw = envOptional(env, 'SANDBOX_SETTLEMENT_DELAY_MS');
  let sandboxSettlementDelayMs: number | null = DEFAULT_SANDBOX_SETTLEMENT_DELAY_MS;
  if (raw === 'off') sandboxSettlementDelayMs = null;
  else if (raw !== undefined) {
    if (!/^[0-9]+$/.test(raw))
      throw new ConfigError(
        `environment variable SANDBOX_SETTLEMENT_DELAY_MS must be a number of milliseconds or 'off', got '${raw}'`,
      );
    sandboxSettlementDelayMs = Number(raw);
  }
  return {
    sandboxSettlementDelayMs,
    sandboxSettlementPollMs: envInt(env, 'SANDBOX_SETTLEMENT_POLL_MS', 1000, 10),
  };
}

/** One step of a sandbox payout that is due: the reports to deliver (ids derived from the reference and the step). */
export interface DueSandboxStep {
  readonly reports: ReadonlyArray<{
    readonly id: string;
    readonly kind: SettlementReportKind;
    readonly reportedAt: Date;
  }>;
  /** Call once the reports were delivered (recorded): the step is not handed out again by this process. */
  sent(): void;
}

/**
 * Which steps of the sandbox payout scripts are due, for one process of an owner (the charge ledger's, the payments
 * service's timer): a payout that started at `startedAt` gets step n once n delays have passed. Steps already sent are
 * remembered until the payout's last step, then forgotten (memory stays bounded by the payouts in progress; a late
 * scan sends a step again, which the report ids make a no-op).
 */
export class SandboxPayoutSteps {
  private readonly sent = new Set<string>();

  due(reference: string, startedAt: Date, minorAmount: string, now: Date, delayMs: number): DueSandboxStep[] {
    const script = sandboxPayoutScript(minorAmount);
    const elapsed = now.getTime() - startedAt.getTime();
    const steps: DueSandboxStep[] = [];
    for (const [step, { afterDelays, kinds }] of script.entries()) {
      const key = `${reference}:${step}`;
      if (elapsed < afterDelays * delayMs || this.sent.has(key)) continue;
      const reportedAt = new Date(startedAt.getTime() + afterDelays * delayMs);
      steps.push({
        reports: kinds.map((kind, i) => ({ id: `sbx_${reference}_${step}_${i}`, kind, reportedAt })),
        sent: () => {
          if (step === script.length - 1)
            for (let k = 0; k < step; k++) this.sent.delete(`${reference}:${k}`);
          else this.sent.add(key);
        },
      });
    }
    return steps;
  }
}
