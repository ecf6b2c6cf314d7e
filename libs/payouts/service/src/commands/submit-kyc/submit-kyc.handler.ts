import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CommandHandler } from '@stablepay/commands';
import { PAYOUTS_COMMANDS, type PayoutsCommandResult, type SubmitKycCommand } from '@stablepay/payouts-api';
import { derivedId, notFound } from '@stablepay/util';
import { PayoutsAggregates } from '../../aggregates';
import { KYC_PROVIDER, type KycProvider } from '../../providers/kyc-provider';
import { PayoutsReader } from '../../read-model/payouts.reader';

/**
 * Use case: the customer completed the hosted KYC step of a session (`{hosted_url}/kyc/:session`): the KYC
 * provider reviews the customer and the outcome is recorded (active, action_required with a fresh session, or
 * kyc_failed). A used or expired session records nothing (409 from the aggregate; the page shows the state).
 */
@Controller()
export class SubmitKycHandler {
  constructor(
    @Inject(PayoutsAggregates) private readonly aggregates: PayoutsAggregates,
    @Inject(PayoutsReader) private readonly reader: PayoutsReader,
    @Inject(KYC_PROVIDER) private readonly kyc: KycProvider,
  ) {}

  @CommandHandler(PAYOUTS_COMMANDS.submitKyc)
  async handle(@Payload() command: SubmitKycCommand): Promise<PayoutsCommandResult> {
    const row = await this.reader.customerByKycSession(command.sessionId);
    if (!row) throw notFound('kyc_session', command.sessionId);
    const o = row.object;
    const result = await this.kyc.review({
      customerId: o.id,
      type: o.type,
      name: o.name,
      email: o.email,
      resubmission: o.status === 'action_required',
    });
    return this.aggregates.customer(
      o.id,
      { merchantId: row.merchant_id, mode: row.mode },
      {
        type: 'RecordKycOutcome',
        sessionId: command.sessionId,
        result,
        nextSessionId: derivedId('kycs', `${command.sessionId}\u0000next`),
        now: this.aggregates.now(),
      },
      `kyc:${command.sessionId}`,
    );
  }
}
