import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, type Decider, type DomainEvent, EVENT_STORE, handleCommand } from '@stablepay/aggregate';
import type { EventStore, Mode } from '@stablepay/event-store';
import {
  beneficiaryDecider,
  beneficiaryStreamId,
  type BeneficiaryCommand,
  customerDecider,
  customerStreamId,
  type CustomerCommand,
  payoutDecider,
  payoutStreamId,
  type PayoutCommand,
} from '@stablepay/payouts-domain';
import type { Clock } from '@stablepay/util';

export interface Owner {
  readonly merchantId: string;
  readonly mode: Mode;
}

/** What an append answers a remote caller: it waits for its own read model at `revision` (read-your-writes). */
export interface Appended {
  readonly id: string;
  readonly revision: number;
  readonly changed: boolean;
}

/**
 * The command side of the payouts aggregates (only the payouts service appends to these streams): load, decide,
 * append with the expected revision. `key` makes event ids deterministic (a retried command appends nothing twice).
 */
@Injectable()
export class PayoutsAggregates {
  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  now(): Date {
    return this.clock.now();
  }

  private async run<S, C extends { type: string; now: Date }, E extends DomainEvent>(
    streamId: string,
    id: string,
    decider: Decider<S, C, E>,
    owner: Owner,
    command: C,
    key: string | undefined,
    creates: boolean,
  ): Promise<Appended> {
    const result = await handleCommand(this.store, streamId, decider, command, {
      ...(key ? { idempotencyKey: key } : {}),
      ...(creates ? { expectNew: true } : {}),
      metadata: { merchantId: owner.merchantId, mode: owner.mode, occurredAt: command.now.toISOString() },
    });
    return { id, revision: result.revision, changed: result.newEvents.length > 0 };
  }

  customer(id: string, owner: Owner, command: CustomerCommand, key?: string): Promise<Appended> {
    return this.run(
      customerStreamId(id),
      id,
      customerDecider,
      owner,
      command,
      key,
      command.type === 'CreateCustomer',
    );
  }

  beneficiary(id: string, owner: Owner, command: BeneficiaryCommand, key?: string): Promise<Appended> {
    return this.run(beneficiaryStreamId(id), id, beneficiaryDecider, owner, command, key, true);
  }

  payout(id: string, owner: Owner, command: PayoutCommand, key?: string): Promise<Appended> {
    return this.run(
      payoutStreamId(id),
      id,
      payoutDecider,
      owner,
      command,
      key,
      command.type === 'CreatePayout',
    );
  }
}
