import { ConfigError } from '@stablepay/util';
import { chargeLedgerConfigFromEnv, DEFAULT_SANDBOX_SETTLEMENT_DELAY_MS } from './charge-ledger.config';

describe('chargeLedgerConfigFromEnv', () => {
  it('the sandbox pays out after ten seconds by default', () => {
    expect(chargeLedgerConfigFromEnv({})).toEqual({
      sandboxSettlementDelayMs: DEFAULT_SANDBOX_SETTLEMENT_DELAY_MS,
      sandboxSettlementPollMs: 1000,
    });
  });

  it('SANDBOX_SETTLEMENT_DELAY_MS sets the delay; off leaves payouts to explicit reports', () => {
    expect(chargeLedgerConfigFromEnv({ SANDBOX_SETTLEMENT_DELAY_MS: '0' }).sandboxSettlementDelayMs).toBe(0);
    expect(
      chargeLedgerConfigFromEnv({ SANDBOX_SETTLEMENT_DELAY_MS: 'off' }).sandboxSettlementDelayMs,
    ).toBeNull();
  });

  it('refuses a delay that is not milliseconds or off, naming the variable', () => {
    expect(() => chargeLedgerConfigFromEnv({ SANDBOX_SETTLEMENT_DELAY_MS: '10s' })).toThrow(ConfigError);
    expect(() => chargeLedgerConfigFromEnv({ SANDBOX_SETTLEMENT_DELAY_MS: '10s' })).toThrow(
      /SANDBOX_SETTLEMENT_DELAY_MS/,
    );
  });
});
