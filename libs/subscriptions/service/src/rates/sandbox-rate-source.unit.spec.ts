import { ConfigError, ManualClock } from '@stablepay/util';
import { DEFAULT_SANDBOX_RATES, parseRateTable, SandboxRateSource } from './sandbox-rate-source';

describe('sandbox rate source (the rates port in the embedded stack and tests)', () => {
  const clock = new ManualClock('2026-06-01T10:00:00.000Z');

  it('quotes ARS only by default (SPEC: the service’s own source quotes ARS), per token, timestamped by the clock', async () => {
    const source = new SandboxRateSource(DEFAULT_SANDBOX_RATES, clock);
    expect(await source.quote('ars')).toEqual([
      {
        currency: 'ARS',
        tokenSymbol: 'USDC',
        value: '1185.50',
        asOf: '2026-06-01T10:00:00.000Z',
        source: 'sandbox',
      },
      {
        currency: 'ARS',
        tokenSymbol: 'USDT',
        value: '1186.25',
        asOf: '2026-06-01T10:00:00.000Z',
        source: 'sandbox',
      },
      {
        currency: 'ARS',
        tokenSymbol: 'DAI',
        value: '1185.50',
        asOf: '2026-06-01T10:00:00.000Z',
        source: 'sandbox',
      },
    ]);
    expect(await source.quote('USD')).toEqual([]);
  });

  it('simulates an outage for XTS (503 rate_source_unavailable)', async () => {
    await expect(new SandboxRateSource(DEFAULT_SANDBOX_RATES, clock).quote('XTS')).rejects.toMatchObject({
      status: 503,
      code: 'rate_source_unavailable',
    });
  });

  it('SANDBOX_RATES adds, overrides and removes entries', () => {
    expect(parseRateTable('USD/USDC=1, usd/usdt=1.0002,ARS/USDC=1200,ARS/DAI=')).toEqual({
      ARS: { USDC: '1200', USDT: '1186.25' },
      USD: { USDC: '1', USDT: '1.0002' },
    });
  });

  it.each(['USD-USDC=1', 'USD/USDC=0', 'USD/USDC=1,5', 'DOLLAR/USDC=1', 'USD/USDC=-1'])(
    'refuses %j at start',
    (raw) => {
      expect(() => parseRateTable(raw)).toThrow(ConfigError);
    },
  );

  it.each(['XYZ/USDC=1', 'DEM/USDC=1', 'XDR/USDC=1', 'JPY/USDC=150'])(
    'refuses %j at start: a rate for a code no price or quote may name could never be used',
    (raw) => {
      expect(() => parseRateTable(raw)).toThrow(/is not an ISO-4217 currency in use with two decimals/);
    },
  );
});
