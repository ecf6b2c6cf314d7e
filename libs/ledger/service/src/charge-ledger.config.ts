import { type SandboxSettlementConfig, sandboxSettlementConfigFromEnv } from '@stablepay/fiat-settlement';

export { DEFAULT_SANDBOX_SETTLEMENT_DELAY_MS } from '@stablepay/fiat-settlement';

/** The charge ledger's settings: the sandbox provider's timing (shared with payments, one setting for both). */
export type ChargeLedgerConfig = SandboxSettlementConfig;

export const CHARGE_LEDGER_CONFIG = Symbol('CHARGE_LEDGER_CONFIG');

export function chargeLedgerConfigFromEnv(env: Record<string, string | undefined>): ChargeLedgerConfig {
  return sandboxSettlementConfigFromEnv(env);
}
