import type { FastifyRequest } from 'fastify';
import { requireNoParameters } from '@stablepay/http';
import { SubscriptionCheckoutsController } from './subscription-checkouts.controller';
import type { SubscriptionCheckoutsUseCases } from './subscription-checkouts.port';

/** A request without an Idempotency-Key, as the controller reads it. */
const UNKEYED = { headers: {}, raw: { rawHeaders: [] } } as unknown as FastifyRequest;

describe('PATCH /subscription-checkouts/:id/cancel body', () => {
  it.each([[[]], ['cancel'], [{ reason: 'duplicate' }]])(
    'refuses %j as every route that takes no parameters does, before cancelling',
    (body) => {
      const cancel = jest.fn();
      const controller = new SubscriptionCheckoutsController({
        cancel,
      } as unknown as SubscriptionCheckoutsUseCases);
      let expected: unknown;
      try {
        requireNoParameters(body);
      } catch (error) {
        expected = error;
      }
      expect(() => controller.cancel({} as never, `schk_${'0'.repeat(26)}`, body, UNKEYED)).toThrow(
        expect.objectContaining({ ...(expected as object), message: (expected as Error).message }),
      );
      expect(cancel).not.toHaveBeenCalled();
    },
  );
});
