import { requireNoParameters } from '@stablepay/http';
import { CheckoutsController } from './checkouts.controller';
import type { PaymentsUseCases } from './payments.port';

// What the client sees of a refusal (the envelope's fields).
const refusal = (fn: () => unknown): object => {
  try {
    fn();
  } catch (error) {
    const { status, type, message, code, param } = error as Record<string, unknown>;
    return { status, type, message, code, param };
  }
  throw new Error('expected a refusal');
};

describe('POST /checkouts/:id/cancel body', () => {
  const cancelled: string[] = [];
  const controller = new CheckoutsController({
    cancelCheckout: (_merchant: unknown, id: string) => {
      cancelled.push(id);
      return Promise.resolve({});
    },
  } as unknown as PaymentsUseCases);
  const merchant = { merchantId: 'mer_1', mode: 'test' } as never;
  const id = 'chk_0123456789abcdefghjkmnpqrs';
  const request = { headers: {} } as never;

  it.each([[[]], ['cancel'], [{ reason: 'duplicate' }]])(
    'refuses %j as every route that takes no parameters does, before cancelling',
    (body) => {
      expect(refusal(() => controller.cancel(merchant, id, body, request))).toEqual(
        refusal(() => requireNoParameters(body)),
      );
      expect(cancelled).toEqual([]);
    },
  );

  it('takes no body or {}', async () => {
    await controller.cancel(merchant, id, undefined, request);
    await controller.cancel(merchant, id, {}, request);
    expect(cancelled).toEqual([id, id]);
  });
});
