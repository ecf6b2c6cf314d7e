import { DomainError } from '@stablepay/util';
import { actionBody } from './payment-actions.controller';

function refused(run: () => unknown): DomainError {
  try {
    run();
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  throw new Error('expected a DomainError');
}

describe('payment action bodies', () => {
  it('passes the known fields of each action through', () => {
    const body = { amount: '1', deadline: 1, signature: '0x', token: 'native', to: '0x1' };
    expect(actionBody('rescue', body)).toEqual(body);
    expect(actionBody('refund', { amount: '1', payer: '0x2' })).toEqual({ amount: '1', payer: '0x2' });
    expect(actionBody('recover', undefined)).toEqual({});
    expect(actionBody('recover', {})).toEqual({});
  });

  it('refuses a destination on recover: it is derived from the payment, never supplied', () => {
    const e = refused(() => actionBody('recover', { to: '0x1111111111111111111111111111111111111111' }));
    expect([e.status, e.type, e.param, e.code]).toEqual([400, 'validation_error', 'to', 'unknown_parameter']);
  });

  it('refuses fields another action takes (a capture names no destination)', () => {
    expect(refused(() => actionBody('capture', { amount: '1', to: '0x1' })).param).toBe('to');
    expect(refused(() => actionBody('capture', { amount: '1', payer: '0x1' })).param).toBe('payer');
  });

  it('refuses a body that is not a JSON object', () => {
    expect(refused(() => actionBody('capture', ['amount'])).status).toBe(400);
    expect(refused(() => actionBody('capture', 'amount=1')).type).toBe('invalid_request');
  });
});
