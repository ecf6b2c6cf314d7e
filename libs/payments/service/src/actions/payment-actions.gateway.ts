import { Inject, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { CommandClient } from '@stablepay/commands';
import type { AuthenticatedMerchant } from '@stablepay/http';
import {
  PAYMENT_ACTION_COMMANDS,
  type PaymentActionAnswer,
  type PaymentActionCommand,
  type PaymentActionKind,
  type PaymentActionResult,
  type PaymentActionsUseCases,
  type SignedActionRequest,
} from '@stablepay/payments-api';
import { PaymentReader } from '../payments/payment.reader';

/**
 * The gateway side of the payment action routes: sends the action to the payments service (which preflights,
 * submits and records) and answers the payment object once its read model reached the answered revision.
 */
@Injectable()
export class PaymentActionsGateway implements PaymentActionsUseCases {
  constructor(
    @Inject(CommandClient) private readonly commands: CommandClient,
    @Inject(PaymentReader) private readonly reader: PaymentReader,
  ) {}

  async act(
    kind: PaymentActionKind,
    merchant: AuthenticatedMerchant,
    paymentId: string,
    body: SignedActionRequest,
    idempotencyKey?: string,
  ): Promise<PaymentActionAnswer> {
    const command: PaymentActionCommand = {
      commandId: idempotencyKey ?? randomUUID(),
      merchant,
      paymentId,
      body,
    };
    const done = await this.commands.send<PaymentActionResult>(
      'payments',
      PAYMENT_ACTION_COMMANDS[kind],
      command,
    );
    const { object } = await this.reader.paymentAtLeast(done.paymentId, done.revision);
    return { object, accepted: done.submission === 'requested' };
  }
}
