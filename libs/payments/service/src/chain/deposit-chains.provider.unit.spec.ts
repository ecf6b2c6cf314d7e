import type { FactoryProvider } from '@nestjs/common';
import { DomainError } from '@stablepay/util';
import type { DepositChains } from '../actions/payment-actions';
import { depositChainsProvider } from './deposit-chains.provider';

describe('deposit chains', () => {
  it('answers 503 chain_unavailable when the service runs without the chain layer', () => {
    const factory = (depositChainsProvider as FactoryProvider<DepositChains>).useFactory;
    const chains = factory(undefined, undefined) as DepositChains;
    let error: unknown;
    try {
      chains.for('eip155:8453');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(DomainError);
    expect(error).toMatchObject({ status: 503, code: 'chain_unavailable' });
  });
});
