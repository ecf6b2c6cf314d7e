import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, EVENT_STORE, handleCommand } from '@stablepay/aggregate';
import type { EventStore, Mode } from '@stablepay/event-store';
import {
  type ChargeCommand,
  type ChargeEvent,
  type ChargeState,
  chargeStreamId,
  decideCharge,
  evolveCharge,
  initialChargeState,
} from '@stablepay/ledger-domain';
import type { Clock } from '@stablepay/util';

export const chargeDecider = {
  initialState: initialChargeState,
  evolve: evolveCharge,
  decide: decideCharge,
} satisfies { initialState: () => ChargeState; evolve: unknown; decide: unknown };

/** The command side of the Charge aggregate (load, decide, append); only the charge-ledger service appends. */
@Injectable()
export class ChargeLedgerCommands {
  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  now(): Date {
    return this.clock.now();
  }

  async run(
    chargeId: string,
    owner: { merchantId: string; mode: Mode },
    command: ChargeCommand,
    idempotencyKey: string,
    options: { readonly expectNew?: boolean } = {},
  ): Promise<{ revision: number; newEvents: ChargeEvent[] }> {
    const result = await handleCommand(this.store, chargeStreamId(chargeId), chargeDecider, command, {
      ...options,
      idempotencyKey,
      metadata: {
        merchantId: owner.merchantId,
        mode: owner.mode,
        occurredAt: this.clock.now().toISOString(),
      },
    });
    return { revision: result.revision, newEvents: result.newEvents };
  }
}
