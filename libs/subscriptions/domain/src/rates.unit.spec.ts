import { formatUnits, isRateValue, parseRateValue, toTokenUnits } from './rates';
import { subscriptionOptions, type OfferedChain } from './subscription-options';

describe('rates: exact conversion of fiat minor units to token smallest units, rounded up', () => {
  it('parses a decimal rate into an exact rational', () => {
    expect(parseRateValue('1185.50')).toEqual({ num: 118550n, den: 100n });
    expect(parseRateValue('1')).toEqual({ num: 1n, den: 1n });
    expect(parseRateValue('0.000000000000000001')).toEqual({ num: 1n, den: 10n ** 18n });
  });

  it.each(['0', '0.00', '-1', '1e3', '1,5', '.5', '5.', '01', '1.0000000000000000001', ''])(
    'refuses the rate %j',
    (bad) => {
      expect(isRateValue(bad)).toBe(false);
      expect(() => parseRateValue(bad)).toThrow(RangeError);
    },
  );

  describe('6 decimals (USDC, USDT)', () => {
    it('rounds up: ARS 1,500.00 at 1,185.50 ARS/USDC is 1.265289 USDC (1.2652889076... exactly)', () => {
      // 150000 * 10^6 * 100 / (100 * 118550) = 1265288.907...
      expect(toTokenUnits(150000n, parseRateValue('1185.50'), 6)).toBe(1265289n);
    });
    it('is exact when the division is exact', () => {
      expect(toTokenUnits(100n, parseRateValue('1'), 6)).toBe(1_000_000n); // 1.00 USD at 1 = 1 USDC
      expect(toTokenUnits(118550n, parseRateValue('1185.50'), 6)).toBe(1_000_000n);
    });
    it('never rounds a remainder down, however small', () => {
      // 1 minor unit at a huge rate is a tiny fraction of a token unit: still 1.
      expect(toTokenUnits(1n, parseRateValue('99999999'), 6)).toBe(1n);
      expect(toTokenUnits(0n, parseRateValue('2'), 6)).toBe(0n);
    });
  });

  describe('18 decimals (DAI-like tokens)', () => {
    it('rounds up at full precision', () => {
      // 1,500.00 ARS at 1,185.50: 1.265288907633909742724589... tokens
      expect(toTokenUnits(150000n, parseRateValue('1185.50'), 18)).toBe(1265288907633909743n);
    });
    it('stays exact for amounts far beyond 2^53', () => {
      const minor = 10n ** 29n - 1n;
      const units = toTokenUnits(minor, parseRateValue('3'), 18);
      // ceil((10^29 - 1) * 10^18 / 300)
      expect(units).toBe(((10n ** 29n - 1n) * 10n ** 18n + 299n) / 300n);
      expect(units * 300n >= minor * 10n ** 18n).toBe(true);
      expect((units - 1n) * 300n < minor * 10n ** 18n).toBe(true);
    });
    it('handles rates with 18 fractional digits', () => {
      expect(toTokenUnits(100n, parseRateValue('0.999999999999999999'), 18)).toBe(1000000000000000002n);
    });
  });

  it('formats units for display without losing digits', () => {
    expect(formatUnits(1265289n, 6)).toBe('1.265289');
    expect(formatUnits(1_000_000n, 6)).toBe('1');
    expect(formatUnits(5n, 18)).toBe('0.000000000000000005');
    expect(formatUnits(150000n, 2)).toBe('1500');
    expect(formatUnits(150050n, 2)).toBe('1500.5');
  });
});

describe('subscription options', () => {
  const chains: OfferedChain[] = [
    {
      caip2: 'eip155:1',
      name: 'Ethereum',
      stablecoins: [
        {
          symbol: 'USDC',
          decimals: 6,
          address: '0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48',
          assetId: 'eip155:1/erc20:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48',
        },
        {
          symbol: 'DAI',
          decimals: 18,
          address: '0x6B175474E89094C44Da98b954EedeAC495271d0F',
          assetId: 'eip155:1/erc20:0x6B175474E89094C44Da98b954EedeAC495271d0F',
        },
      ],
    },
    {
      caip2: 'eip155:8453',
      name: 'Base',
      stablecoins: [
        {
          symbol: 'USDC',
          decimals: 6,
          address: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
          assetId: 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
        },
      ],
    },
  ];
  const rates = [
    {
      currency: 'ARS',
      tokenSymbol: 'USDC',
      value: '1185.50',
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
  ];
  const checkout = {
    price: '150000',
    cap: '300000',
    budget: '1500000',
    price_currency: 'ARS',
    supported_chains: ['eip155:8453', 'eip155:1'],
  };

  it('lists every quoted stablecoin on every supported chain, converting price, cap and budget at one rate', () => {
    const options = subscriptionOptions(checkout, chains, rates);
    expect(options.map((o) => `${o.chain} ${o.token_symbol}`)).toEqual([
      'eip155:8453 USDC',
      'eip155:1 USDC',
      'eip155:1 DAI',
    ]);
    expect(options[0]).toEqual({
      chain: 'eip155:8453',
      chain_name: 'Base',
      asset: 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
      token_symbol: 'USDC',
      token_decimals: 6,
      token_address: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
      price_amount: '1265289',
      cap_amount: '2530578',
      budget_amount: '12652890', // 12652889.07... rounded up
      rate: '1185.50',
      rate_currency: 'ARS',
      rate_as_of: '2026-06-01T10:00:00.000Z',
      rate_source: 'sandbox',
    });
    expect(options[2]).toMatchObject({ token_decimals: 18, price_amount: '1265288907633909743' });
  });

  it('converts a cap or budget of k times the price to exactly k charges of the converted price', () => {
    // ARS 100.00 at 1,185.50 per USDC is 84,352.6... units, rounded up to 84,353; ARS 300.00 on its own rounds up to
    // 253,058, one unit short of three charges; ARS 999.00 and its default budget (10 times) the same way.
    const [usdc] = subscriptionOptions(
      { ...checkout, price: '10000', cap: '20000', budget: '30000', supported_chains: ['eip155:8453'] },
      chains,
      rates,
    );
    expect(usdc).toMatchObject({ price_amount: '84353', cap_amount: '168706', budget_amount: '253059' });
    const [plan] = subscriptionOptions(
      { ...checkout, price: '99900', cap: '999000', budget: '999000', supported_chains: ['eip155:8453'] },
      chains,
      rates,
    );
    expect(plan).toMatchObject({ price_amount: '842683', budget_amount: (842683n * 10n).toString() });
  });

  it('leaves out tokens without a rate and chains no longer supported; always an array', () => {
    expect(subscriptionOptions(checkout, chains, rates.slice(0, 1)).map((o) => o.token_symbol)).toEqual([
      'USDC',
      'USDC',
    ]);
    expect(subscriptionOptions({ ...checkout, supported_chains: ['eip155:10'] }, chains, rates)).toEqual([]);
    expect(subscriptionOptions({ ...checkout, price_currency: 'EUR' }, chains, rates)).toEqual([]);
  });
});
