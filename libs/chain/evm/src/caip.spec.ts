import { DomainError, invalidRequest } from '@stablepay/util';
import {
  formatCaip19,
  formatCaip2,
  normalizeCaip19,
  normalizeCaip2,
  parseAddress,
  parseCaip19,
  parseCaip2,
} from './caip';

const USDC_BASE = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';

function thrown(fn: () => unknown): DomainError {
  try {
    fn();
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  throw new Error('expected a DomainError');
}

describe('CAIP-2', () => {
  it('parses an eip155 chain id into its bigint chain id and canonical string', () => {
    expect(parseCaip2('eip155:42161')).toEqual({
      namespace: 'eip155',
      chainId: 42161n,
      caip2: 'eip155:42161',
    });
  });

  it('formats a chain id given as number or bigint', () => {
    expect(formatCaip2(8453)).toBe('eip155:8453');
    expect(formatCaip2(1n)).toBe('eip155:1');
  });

  it('refuses to format a non-positive or fractional chain id', () => {
    expect(() => formatCaip2(0)).toThrow(RangeError);
    expect(() => formatCaip2(1.5)).toThrow(RangeError);
  });

  it('rejects another namespace with unsupported_chain_namespace on the given param', () => {
    const error = thrown(() => parseCaip2('solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp', 'supported_chains[1]'));
    expect(error.toJSON()).toEqual({
      type: 'validation_error',
      status: 400,
      code: 'unsupported_chain_namespace',
      param: 'supported_chains[1]',
      message: "Chain namespace 'solana' is not supported; only eip155 (EVM) chains are",
    });
  });

  it.each([
    ['eip155:0'],
    ['eip155:08453'],
    ['eip155:-1'],
    ['eip155:0x2105'],
    ['eip155:'],
    ['8453'],
    ['EIP155:1'],
    ['eip155:1 '],
    [' eip155:1'],
    ['eip155:1/erc20:0x0000000000000000000000000000000000000000'],
    ['eip155:123456789012345678901234567890123'],
  ])('rejects %j with invalid_caip2', (input) => {
    const error = thrown(() => parseCaip2(input));
    expect(error.code).toBe('invalid_caip2');
    expect(error.param).toBe('chain');
  });

  it('rejects a non-string with invalid_caip2 instead of crashing', () => {
    expect(thrown(() => parseCaip2(8453)).code).toBe('invalid_caip2');
    expect(thrown(() => parseCaip2(null)).code).toBe('invalid_caip2');
  });

  it('normalises to the canonical string', () => {
    expect(normalizeCaip2('eip155:10')).toBe('eip155:10');
  });
});

describe('CAIP-19', () => {
  it('parses an erc20 asset id and returns the address checksummed', () => {
    const parsed = parseCaip19(`eip155:8453/erc20:${USDC_BASE.toLowerCase()}`);
    expect(parsed.chain.chainId).toBe(8453n);
    expect(parsed.address).toBe(USDC_BASE);
    expect(parsed.caip19).toBe(`eip155:8453/erc20:${USDC_BASE}`);
  });

  it('normalises lower- and upper-case addresses to the same checksummed id', () => {
    const upper = `eip155:8453/erc20:0x${USDC_BASE.slice(2).toUpperCase()}`;
    expect(normalizeCaip19(upper)).toBe(normalizeCaip19(`eip155:8453/erc20:${USDC_BASE.toLowerCase()}`));
  });

  it('formats a canonical asset id from a chain id and any-case address', () => {
    expect(formatCaip19(8453, USDC_BASE.toLowerCase())).toBe(`eip155:8453/erc20:${USDC_BASE}`);
  });

  it('rejects a mixed-case address with a broken checksum as invalid_address', () => {
    const typo = USDC_BASE.replace('fCD6', 'fcD6');
    const error = thrown(() => parseCaip19(`eip155:8453/erc20:${typo}`, 'asset'));
    expect(error.code).toBe('invalid_address');
    expect(error.param).toBe('asset');
  });

  it('rejects a short address as invalid_address', () => {
    expect(thrown(() => parseCaip19('eip155:1/erc20:0x1234')).code).toBe('invalid_address');
  });

  it('rejects a non-erc20 asset namespace with unsupported_asset_namespace', () => {
    expect(thrown(() => parseCaip19('eip155:1/slip44:60')).code).toBe('unsupported_asset_namespace');
  });

  it('keeps unsupported_chain_namespace for a non-EVM chain part', () => {
    expect(thrown(() => parseCaip19('cosmos:cosmoshub-3/slip44:118')).code).toBe(
      'unsupported_chain_namespace',
    );
  });

  it.each([['eip155:1'], ['eip155:01/erc20:' + USDC_BASE], ['eip155:1/erc20:' + USDC_BASE + '/1'], ['']])(
    'rejects %j with invalid_caip19',
    (input) => {
      expect(thrown(() => parseCaip19(input)).code).toBe('invalid_caip19');
    },
  );
});

describe('parseAddress', () => {
  it('returns the EIP-55 checksum form', () => {
    expect(parseAddress(USDC_BASE.toLowerCase())).toBe(USDC_BASE);
  });

  it('rejects a value without the 0x prefix, naming the param', () => {
    const error = thrown(() => parseAddress(USDC_BASE.slice(2), 'destination'));
    expect(error.code).toBe('invalid_address');
    expect(error.param).toBe('destination');
  });

  it('accepts an all-uppercase address', () => {
    expect(parseAddress('0x' + USDC_BASE.slice(2).toUpperCase())).toBe(USDC_BASE);
  });

  it('refuses the zero address where nonZero says it must sign or receive, and only there', () => {
    const zero = `0x${'0'.repeat(40)}`;
    expect(parseAddress(zero, 'token')).toBe(zero);
    const error = thrown(() => parseAddress(zero, 'settlement_address', { nonZero: true }));
    expect(error).toMatchObject({ status: 400, code: 'invalid_address', param: 'settlement_address' });
    expect(error.message).toContain('zero address');
  });

  it('names the param and what was received, and tells absent from malformed', () => {
    expect(thrown(() => parseAddress('0x12', 'payer')).message).toBe(
      'payer must be an EVM address (0x followed by 40 hex digits); received "0x12".',
    );
    expect(thrown(() => parseAddress(undefined, 'payer')).message).toMatch(/^payer is required: /);
  });

  it('raises the error type a route asks for (a pause declaration is invalid_request)', () => {
    const error = thrown(() =>
      parseAddress(USDC_BASE.replace('C', 'c'), 'merchant_pauser', {
        invalid: (param, message, code) => invalidRequest(message, code, param),
      }),
    );
    expect(error).toMatchObject({
      type: 'invalid_request',
      param: 'merchant_pauser',
      code: 'invalid_address',
    });
  });
});
