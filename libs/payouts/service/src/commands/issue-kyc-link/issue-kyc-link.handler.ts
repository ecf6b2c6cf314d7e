import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CommandHandler } from '@stablepay/commands';
import {
  type IssueKycLinkCommand,
  PAYOUTS_COMMANDS,
  type PayoutsCommandResult,
} from '@stablepay/payouts-api';
import { derivedId } from '@stablepay/util';
import { PayoutsAggregates } from '../../aggregates';
import { PayoutsReader } from '../../read-model/payouts.reader';

/**
 * Use case: a fresh hosted KYC link for a customer that still has KYC to complete (POST /customers/:id/kyc_links,
 * docs/payouts.md "Customers"). The session id derives from the request's command id, so a retried request answers
 * the link its first attempt issued.
 */
@Controller()
export class IssueKycLinkHandler {
  constructor(
    @Inject(PayoutsAggregates) private readonly aggregates: PayoutsAggregates,
    @Inject(PayoutsReader) private readonly reader: PayoutsReader,
  ) {}

  @CommandHandler(PAYOUTS_COMMANDS.issueKycLink)
  async handle(@Payload() command: IssueKycLinkCommand): Promise<PayoutsCommandResult> {
    const { merchantId, mode } = command.merchant;
    const customer = await this.reader.getOwned('customer', command.merchant, command.customerId);
    const { revision } = await this.aggregates.customer(
      customer.id,
      { merchantId, mode },
      {
        type: 'IssueKycLink',
        sessionId: derivedId('kycs', `${customer.id}\u0000${command.commandId}`),
        now: this.aggregates.now(),
      },
      `kyc-link:${command.commandId}`,
    );
    return { id: customer.id, revision };
  }
}
