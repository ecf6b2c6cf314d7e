import { Controller, Inject, Optional } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { deterministicEventId, EVENT_STORE } from '@stablepay/aggregate';
import { CommandHandler } from '@stablepay/commands';
import type { EventStore } from '@stablepay/event-store';
import { SANCTIONS_SCREENING, type SanctionsScreening } from '@stablepay/evm';
import { PAYOUTS_COMMANDS, type PayoutsCommandResult, type RefundHeldCommand } from '@stablepay/payouts-api';
import { heldRefund, parseRefundHeldInput, payoutStreamId } from '@stablepay/payouts-domain';
import { cannotProcess, DomainError } from '@stablepay/util';
import { PayoutsAggregates } from '../../aggregates';
import { foldPayout } from '../../read-model/objects';
import { PayoutsReader } from '../../read-model/payouts.reader';
import { HELD_REFUNDS, type HeldRefunds } from './held-refunds';

/**
 * Use case: POST /payouts/:id/refund_held (docs/payouts.md, "Held funds"). A payout that failed before its sweep
 * with `customer_not_active` keeps its deposit at the customer's address; the merchant returns it to the wallet it
 * came from with its signer's PayoutRefund, which names the payout, the token, that wallet and the deposit amount:
 * the destination and amount are the payout's, never the caller's; a minted deposit names no wallet it came from,
 * so the merchant names and signs the destination (`to`) or the refund is refused. Checked in this order, nothing changing on a
 * refusal: the payout is the merchant's (404), the body's types (400), the payout's state (409/422,
 * `heldRefund`), the sender screened again (422 `sender_flagged`, 503 while the provider is unreachable), then the
 * deposit contract (signature, deadline, replay). The refund's transaction becomes `PayoutRefunded.v1` (with
 * `txHash`), so `payout.refunded`. A test-helper deposit moved nothing on chain: it is recorded without a
 * transaction.
 */
@Controller()
export class RefundHeldHandler {
  constructor(
    @Inject(PayoutsAggregates) private readonly aggregates: PayoutsAggregates,
    @Inject(PayoutsReader) private readonly reader: PayoutsReader,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(SANCTIONS_SCREENING) private readonly screening: SanctionsScreening,
    @Optional() @Inject(HELD_REFUNDS) private readonly refunds?: HeldRefunds | null,
  ) {}

  @CommandHandler(PAYOUTS_COMMANDS.refundHeld)
  async handle(@Payload() command: RefundHeldCommand): Promise<PayoutsCommandResult> {
    const { merchantId, mode } = command.merchant;
    const owned = await this.reader.getOwned('payout', command.merchant, command.payoutId);
    const signed = parseRefundHeldInput(command.input);
    const streamId = payoutStreamId(owned.id);
    const history = await this.store.readStream(streamId);
    const key = `refund-held:${command.commandId}`;
    // The same request again (its Idempotency-Key) after it was applied: answered as it was, not refused as refunded.
    if (history.some((e) => e.id === deterministicEventId(streamId, key, 0)))
      return { id: owned.id, revision: history.length - 1 };
    const payout = foldPayout(history);
    const move = heldRefund(payout, signed.to);
    const screened = await this.screening.screen([move.to]);
    if (screened.kind === 'unreachable')
      throw new DomainError({
        type: 'api_error',
        status: 503,
        code: 'screening_unavailable',
        message: 'The sanctions screening of the refund destination is unreachable; nothing was sent. Retry.',
      });
    if (screened.kind === 'match')
      throw cannotProcess(
        'sender_flagged',
        `The payout's sender ${move.to} now matches the sanctions screening: its funds stay frozen and are never sent back.`,
      );
    const txHash = payout.deposit?.simulated
      ? null
      : await this.chainRefund(payout, merchantId, move, signed);
    const { revision } = await this.aggregates.payout(
      owned.id,
      { merchantId, mode },
      {
        type: 'RecordHeldRefunded',
        txHash,
        ...(signed.to !== undefined ? { to: signed.to } : {}),
        now: this.aggregates.now(),
      },
      key,
    );
    return { id: owned.id, revision };
  }

  private chainRefund(
    payout: Parameters<HeldRefunds['refund']>[0],
    merchantId: string,
    move: { readonly to: string; readonly amount: string },
    signed: Parameters<HeldRefunds['refund']>[3],
  ): Promise<string> {
    // A deposit the chain reported, on a process that cannot move it: never recorded as returned.
    if (!this.refunds)
      throw new DomainError({
        type: 'api_error',
        status: 503,
        code: 'payout_deposits_unavailable',
        message: 'This deployment has no payouts chain configuration to return funds from a deposit address.',
      });
    return this.refunds.refund(payout, merchantId, move, signed);
  }
}
