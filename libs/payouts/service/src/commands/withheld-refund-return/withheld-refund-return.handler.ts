import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { deterministicEventId, EVENT_STORE } from '@stablepay/aggregate';
import { CommandHandler } from '@stablepay/commands';
import type { EventStore } from '@stablepay/event-store';
import { SANCTIONS_SCREENING, type SanctionsScreening } from '@stablepay/evm';
import {
  PAYOUTS_COMMANDS,
  type PayoutsCommandResult,
  type RecordWithheldRefundReturnCommand,
} from '@stablepay/payouts-api';
import {
  parseWithheldRefundReturnInput,
  payoutStreamId,
  withheldRefundReturn,
} from '@stablepay/payouts-domain';
import { cannotProcess, DomainError } from '@stablepay/util';
import { PayoutsAggregates } from '../../aggregates';
import { foldPayout } from '../../read-model/objects';
import { PayoutsReader } from '../../read-model/payouts.reader';

/**
 * Use case: the operator records that the off-ramp returned a withheld refund (docs/payouts.md, "Refund withheld at
 * the off-ramp"), so the payout is `refunded` and `payout.refunded` closes the merchant's books. Nothing moves here:
 * the off-ramp already sent the funds; this is the record of it. Checked in this order, nothing changing on a
 * refusal: the payout is the path merchant's (404), the body (400), the payout's refund withheld and not yet
 * returned (409, `withheldRefundReturn`), `to` screened as every destination is (422 `destination_flagged`, 503
 * while the provider is unreachable). The amount is the deposit's, never the caller's.
 */
@Controller()
export class RecordWithheldRefundReturnHandler {
  constructor(
    @Inject(PayoutsAggregates) private readonly aggregates: PayoutsAggregates,
    @Inject(PayoutsReader) private readonly reader: PayoutsReader,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(SANCTIONS_SCREENING) private readonly screening: SanctionsScreening,
  ) {}

  @CommandHandler(PAYOUTS_COMMANDS.recordWithheldRefundReturn)
  async handle(@Payload() command: RecordWithheldRefundReturnCommand): Promise<PayoutsCommandResult> {
    const owned = await this.reader.getOfMerchant('payout', command.merchantId, command.payoutId);
    const returned = parseWithheldRefundReturnInput(command.input);
    const streamId = payoutStreamId(owned.id);
    const history = await this.store.readStream(streamId);
    const key = `withheld-refund-return:${command.commandId}`;
    // The same request again (its Idempotency-Key) after it was applied: answered as it was, not refused as refunded.
    if (history.some((e) => e.id === deterministicEventId(streamId, key, 0)))
      return { id: owned.id, revision: history.length - 1 };
    withheldRefundReturn(foldPayout(history));
    // Lowercased: a mixed-case address with a wrong checksum is still the address (the screening checksums it).
    const screened = await this.screening.screen([returned.to.toLowerCase()]);
    if (screened.kind === 'unreachable')
      throw new DomainError({
        type: 'api_error',
        status: 503,
        code: 'screening_unavailable',
        message:
          'The sanctions screening of the refund destination is unreachable; nothing was recorded. Retry.',
      });
    // Recording it would close the books on funds sent to a sanctioned wallet: compliance's case, not a refund.
    if (screened.kind === 'match')
      throw cannotProcess(
        'destination_flagged',
        `The refund destination ${returned.to} matches the sanctions screening: nothing was recorded; escalate to compliance.`,
        'to',
      );
    const { revision } = await this.aggregates.payout(
      owned.id,
      { merchantId: owned.merchant_id, mode: owned.mode },
      { type: 'RecordWithheldRefundReturned', ...returned, now: this.aggregates.now() },
      key,
    );
    return { id: owned.id, revision };
  }
}
