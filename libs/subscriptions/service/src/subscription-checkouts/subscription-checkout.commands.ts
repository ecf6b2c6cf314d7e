import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, EVENT_STORE, handleCommand } from '@stablepay/aggregate';
import type { EventStore, Mode } from '@stablepay/event-store';
import {
  type CreateContext,
  type CreateSubscriptionCheckoutInput,
  type SubscriptionCheckoutCommand,
  subscriptionCheckoutDecider,
  subscriptionCheckoutStreamId,
  type SubscriptionChargeSucceededData,
  type SubscriptionCreatedData,
} from '@stablepay/subscriptions-domain';
import { canonicalJson, type Clock, derivedId, newId, randomHex } from '@stablepay/util';
import { type SubscriptionCheckoutRow, SubscriptionCheckoutReader } from './subscription-checkout.reader';

export interface CommandResult {
  readonly row: SubscriptionCheckoutRow;
  /** False when the command changed nothing (an idempotent no-op). */
  readonly changed: boolean;
}

/** What an append answers a remote caller: it waits for its own read model at `revision` (read-your-writes). */
export interface Appended {
  readonly id: string;
  readonly revision: number;
  readonly changed: boolean;
}

function createCommand(
  id: string,
  input: CreateSubscriptionCheckoutInput,
  details: { businessName: string; hostedUrl: string; context: CreateContext },
  now: Date,
): SubscriptionCheckoutCommand {
  return {
    type: 'CreateSubscriptionCheckout',
    id,
    // Random 32 bytes: the on-chain id the subscribe transaction registers (and the subscription id after).
    onchainId: randomHex(32),
    businessName: details.businessName,
    checkoutUrl: `${details.hostedUrl}/subscribe/${id}`,
    input,
    context: details.context,
    now,
  };
}

/**
 * The command side of the SubscriptionCheckout aggregate: load, decide, append. create and cancel answer the
 * revision (their caller, the gateway, waits for its read model); the service's own commands wait here.
 */
@Injectable()
export class SubscriptionCheckoutCommands {
  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(SubscriptionCheckoutReader) private readonly reader: SubscriptionCheckoutReader,
  ) {}

  private async run(
    id: string,
    owner: { merchantId: string; mode: Mode },
    command: SubscriptionCheckoutCommand,
    idempotencyKey?: string,
  ): Promise<CommandResult> {
    const { revision, changed } = await this.append(id, owner, command, idempotencyKey);
    return { row: await this.reader.getAtLeast(id, revision), changed };
  }

  private async append(
    id: string,
    owner: { merchantId: string; mode: Mode },
    command: SubscriptionCheckoutCommand,
    idempotencyKey?: string,
  ): Promise<Appended> {
    const result = await handleCommand(
      this.store,
      subscriptionCheckoutStreamId(id),
      subscriptionCheckoutDecider,
      command,
      {
        ...(idempotencyKey ? { idempotencyKey } : {}),
        // A create appends a new stream without reading it first (a retry or a collision falls back to a read).
        ...(command.type === 'CreateSubscriptionCheckout' ? { expectNew: true } : {}),
        metadata: { merchantId: owner.merchantId, mode: owner.mode, occurredAt: command.now.toISOString() },
      },
    );
    return { id, revision: result.revision, changed: result.newEvents.length > 0 };
  }

  create(
    owner: { merchantId: string; mode: Mode },
    input: CreateSubscriptionCheckoutInput,
    details: { businessName: string; hostedUrl: string; context: CreateContext },
    commandId?: string,
  ): Promise<Appended> {
    const now = this.clock.now();
    // With a command id the new intent's id derives from it (scoped by merchant, mode and the parameters), so a
    // retried create finds the intent its first attempt appended and answers it instead of creating a second.
    const id = commandId
      ? derivedId('schk', [owner.merchantId, owner.mode, commandId, canonicalJson(input)].join('\u0000'))
      : newId('schk', now);
    return this.append(id, owner, createCommand(id, input, details, now), commandId);
  }

  /**
   * Bulk creation (imports, load and paging tests): each intent is decided exactly as create() decides it and
   * appended with bounded concurrency; the read model is not awaited (the projection catches up on its own).
   * All or nothing per intent, not per batch: the first refused input stops the batch and names its index.
   */
  async createMany(
    owner: { merchantId: string; mode: Mode },
    inputs: readonly CreateSubscriptionCheckoutInput[],
    details: { businessName: string; hostedUrl: string; context: CreateContext },
    concurrency: number,
  ): Promise<string[]> {
    const now = this.clock.now();
    const commands = inputs.map((input) => {
      const id = newId('schk', now);
      return { id, command: createCommand(id, input, details, now) };
    });
    // Decide everything first, so a refused input appends nothing of the batch.
    commands.forEach(({ command }, index) => {
      try {
        subscriptionCheckoutDecider.decide(command, subscriptionCheckoutDecider.initialState());
      } catch (error) {
        if (error instanceof Error) error.message = `item ${index}: ${error.message}`;
        throw error;
      }
    });
    const metadata = { merchantId: owner.merchantId, mode: owner.mode, occurredAt: now.toISOString() };
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < commands.length; i = next++) {
        const item = commands[i];
        if (item)
          await handleCommand(
            this.store,
            subscriptionCheckoutStreamId(item.id),
            subscriptionCheckoutDecider,
            item.command,
            { metadata, expectNew: true },
          );
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, commands.length)) }, worker));
    return commands.map((c) => c.id);
  }

  cancel(
    row: Pick<SubscriptionCheckoutRow, 'id' | 'merchant_id' | 'mode'>,
    by: 'merchant' | 'customer',
    commandId?: string,
  ): Promise<Appended> {
    return this.append(
      row.id,
      { merchantId: row.merchant_id, mode: row.mode },
      { type: 'CancelSubscriptionCheckout', by, now: this.clock.now() },
      commandId,
    );
  }

  /** Issued by the durable timer; a no-op unless the intent is pending and due (so running it twice is harmless). */
  expire(row: Pick<SubscriptionCheckoutRow, 'id' | 'merchant_id' | 'mode'>): Promise<CommandResult> {
    return this.run(
      row.id,
      { merchantId: row.merchant_id, mode: row.mode },
      { type: 'ExpireSubscriptionCheckout', now: this.clock.now() },
      'expire',
    );
  }

  /**
   * For the on-chain subscribe flow: the subscribe transaction and the first charge confirmed. `key` names the chain
   * fact that completes it (a redelivery appends nothing; the same transaction re-included after a reorg is a new
   * observation and completes the intent again).
   */
  complete(
    row: Pick<SubscriptionCheckoutRow, 'id' | 'merchant_id' | 'mode'>,
    input: {
      subscriber: string;
      chain: string;
      asset: string;
      txHash: string | null;
      subscription?: SubscriptionCreatedData | null;
      firstCharge?: SubscriptionChargeSucceededData | null;
    },
    key?: string,
  ): Promise<CommandResult> {
    return this.run(
      row.id,
      { merchantId: row.merchant_id, mode: row.mode },
      { type: 'CompleteSubscriptionCheckout', ...input, now: this.clock.now() },
      key === undefined ? 'complete' : `complete:${key}`,
    );
  }

  /** A reorg took out the subscribe transaction `txHash`: the completion resting on it is undone (docs, Reorgs). */
  retractCompletion(
    row: Pick<SubscriptionCheckoutRow, 'id' | 'merchant_id' | 'mode'>,
    txHash: string,
    key: string,
  ): Promise<Appended> {
    return this.append(
      row.id,
      { merchantId: row.merchant_id, mode: row.mode },
      { type: 'RetractSubscriptionCheckoutCompletion', txHash, now: this.clock.now() },
      `retract-completion:${key}`,
    );
  }
}
