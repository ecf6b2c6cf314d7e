import { ConfigError, envInt, envOptional } from '@stablepay/util';

export interface ChargeLedgerConfig {
  /**
   * How long after a test-mode fiat charge is listed the sandbox settlement provider reports on it
   * (SANDBOX_SETTLEMENT_DELAY_MS, default 10 s of the service clock; `off`: the sandbox reports nothing on its own).
   */
  readonly sandboxSettlementDelayMs: number | null;
  /** How often (real time) the sandbox looks for payouts due (SANDBOX_SETTLEMENT_POLL_MS, default 1000). */
  readonly sandboxSettlementPollMs: number;
}

export const CHARGE_LEDGER_CONFIG = Symbol('CHARGE_LEDGER_CONFIG');

export const DEFAULT_SANDBOX_SETTLEMENT_DELAY_MS = 10_000;

export function chargeLedgerConfigFromEnv(env: Record<string, string | undefined>): ChargeLedgerConfig {
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
