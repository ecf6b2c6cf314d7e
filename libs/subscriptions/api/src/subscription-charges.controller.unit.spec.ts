import type { FastifyRequest } from 'fastify';
import { SubscriptionChargesController } from './subscription-charges.controller';
import type { SubscriptionChargesUseCases } from './subscription-charges.port';

const reached = (): never => {
  throw new Error('the body was accepted');
};
const controller = new SubscriptionChargesController({
  quote: reached,
  charge: reached,
} as unknown as SubscriptionChargesUseCases);
const merchant = { merchantId: 'mer_1', mode: 'test' } as const;
const id = `0x${'ab'.repeat(32)}`;
const request = { headers: {} } as FastifyRequest;
const body = { amount: '1', nonce: 0, deadline: '1790000000', signature: `0x${'11'.repeat(65)}` };

const MAX = `2^256 - 1 (${(1n << 256n) - 1n}), the largest uint256`;

describe('POST /subscriptions/:id/charge body', () => {
  it.each([['soon'], ['-1'], [undefined]])(
    'a malformed or absent deadline (%j) is invalid_deadline, as on every other signed route',
    (deadline) => {
      expect(() => controller.charge(merchant, id, { ...body, deadline }, request)).toThrow(
        expect.objectContaining({
          status: 400,
          type: 'validation_error',
          param: 'deadline',
          code: 'invalid_deadline',
        }),
      );
    },
  );

  it.each([['9'.repeat(79)], [1e80]])('a deadline %j is told it is above uint256', (deadline) => {
    expect(() => controller.charge(merchant, id, { ...body, deadline }, request)).toThrow(
      expect.objectContaining({
        param: 'deadline',
        code: 'invalid_deadline',
        message: `deadline must be at most ${MAX}.`,
      }),
    );
  });

  it('a 100-digit amount is told it is above uint256', () => {
    expect(() => controller.charge(merchant, id, { ...body, amount: '9'.repeat(100) }, request)).toThrow(
      expect.objectContaining({ param: 'amount', message: `amount must be at most ${MAX}.` }),
    );
  });

  it.each([
    ['amount', '01', 'invalid_amount'],
    ['amount', undefined, 'invalid_amount'],
    ['signature', '0x1234', 'invalid_signature'],
    ['signature', undefined, 'invalid_signature'],
  ])('a malformed or absent %s (%j) is %s, as on every other signed route', (param, value, code) => {
    expect(() => controller.charge(merchant, id, { ...body, [param]: value }, request)).toThrow(
      expect.objectContaining({ status: 400, type: 'validation_error', param, code }),
    );
  });
});
