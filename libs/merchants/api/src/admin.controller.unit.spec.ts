import type { FastifyRequest } from 'fastify';
import type { DataSource } from 'typeorm';
import type { Projections } from '@stablepay/aggregate';
import type { EventBus } from '@stablepay/event-bus';
import { IDEMPOTENCY_CLAIMED_AT, IDEMPOTENCY_COMMAND_ID } from '@stablepay/http';
import { AdminController } from './admin.controller';
import type { MerchantsUseCases } from './merchants.port';

describe('POST /admin/merchants', () => {
  it("passes the Idempotency-Key claim's time as the attempt's start, beside the key's command id", async () => {
    const received: Array<Parameters<MerchantsUseCases['createMerchant']>[0]> = [];
    const merchants = {
      createMerchant: async (input: Parameters<MerchantsUseCases['createMerchant']>[0]) => {
        received.push(input);
        return {} as Awaited<ReturnType<MerchantsUseCases['createMerchant']>>;
      },
    } as unknown as MerchantsUseCases;
    const controller = new AdminController(merchants, {} as DataSource, {} as Projections, {} as EventBus);
    const claimedAt = new Date('2026-11-23T00:00:00Z');
    const request = {
      headers: { 'idempotency-key': 'k-1' },
      [IDEMPOTENCY_COMMAND_ID]: 'k-1\u219242',
      [IDEMPOTENCY_CLAIMED_AT]: claimedAt,
    } as unknown as FastifyRequest;

    await controller.createMerchant({ name: 'Acme', mode: 'test' }, request);
    await controller.createMerchant({ name: 'Acme', mode: 'test' }, { headers: {} } as FastifyRequest);

    expect(received).toEqual([
      {
        name: 'Acme',
        mode: 'test',
        settlementMode: 'crypto',
        commandId: 'k-1\u219242',
        attemptStartedAt: claimedAt.toISOString(),
      },
      { name: 'Acme', mode: 'test', settlementMode: 'crypto' },
    ]);
  });
});
