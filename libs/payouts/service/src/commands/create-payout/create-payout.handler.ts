import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CommandHandler } from '@stablepay/commands';
import {
  type CreatePayoutCommand,
  PAYOUTS_COMMANDS,
  type PayoutsCommandResult,
} from '@stablepay/payouts-api';
import { BENEFICIARY_ID, CUSTOMER_ID } from '@stablepay/payouts-domain';
import { canonicalJson, derivedId, notFound, validationError } from '@stablepay/util';
import { PayoutsAggregates } from '../../aggregates';
import { payoutTokens } from '../../offering';
import { PAYOUTS_CONFIG, type PayoutsConfig } from '../../payouts.config';
import { PayoutsReader } from '../../read-model/payouts.reader';
import { PAYOUTS_LIVE_PROVIDERS, requireLivePayoutProviders } from '../../providers/live-payouts';
import {
  CUSTOMER_DEPOSIT_ADDRESS,
  type CustomerDepositAddress,
  isCurrentDepositAddress,
} from '../../providers/customer-deposit-address';

/**
 * Use case: create a payout (POST /payouts) for one of the merchant's customers to one of its beneficiaries.
 * Another merchant's customer or beneficiary is as unknown as a made-up id (404 naming the field); a customer that
 * is not active is refused by the aggregate (422 customer_not_active).
 */
@Controller()
export class CreatePayoutHandler {
  constructor(
    @Inject(PayoutsAggregates) private readonly aggregates: PayoutsAggregates,
    @Inject(PayoutsReader) private readonly reader: PayoutsReader,
    @Inject(PAYOUTS_CONFIG) private readonly config: PayoutsConfig,
    @Inject(PAYOUTS_LIVE_PROVIDERS) private readonly liveProviders: boolean,
    @Inject(CUSTOMER_DEPOSIT_ADDRESS) private readonly depositAddress: CustomerDepositAddress,
  ) {}

  @CommandHandler(PAYOUTS_COMMANDS.createPayout)
  async handle(@Payload() command: CreatePayoutCommand): Promise<PayoutsCommandResult> {
    const { merchant, input } = command;
    requireLivePayoutProviders(merchant.mode, this.liveProviders);
    const customerId = input.customer;
    const beneficiaryId = input.beneficiary;
    if (typeof customerId !== 'string')
      throw validationError('customer', 'customer is required: the id of an active customer (cus_...).');
    if (typeof beneficiaryId !== 'string')
      throw validationError('beneficiary', 'beneficiary is required: a beneficiary id (bnf_...).');
    const customer = CUSTOMER_ID.test(customerId)
      ? await this.reader.find('customer', customerId)
      : undefined;
    if (!customer || customer.merchant_id !== merchant.merchantId || customer.mode !== merchant.mode)
      throw Object.assign(notFound('customer', customerId), { param: 'customer' });
    const beneficiary = BENEFICIARY_ID.test(beneficiaryId)
      ? await this.reader.find('beneficiary', beneficiaryId)
      : undefined;
    if (!beneficiary || beneficiary.merchant_id !== merchant.merchantId || beneficiary.mode !== merchant.mode)
      throw Object.assign(notFound('beneficiary', beneficiaryId), { param: 'beneficiary' });
    const id = derivedId(
      'po',
      [merchant.merchantId, merchant.mode, command.commandId, canonicalJson(input)].join('\u0000'),
    );
    const { revision } = await this.aggregates.payout(
      id,
      merchant,
      {
        type: 'CreatePayout',
        id,
        input,
        context: {
          customer: {
            id: customer.id,
            status: customer.status,
            depositAddress: customer.deposit_address,
            depositAddressRetired: !isCurrentDepositAddress(
              this.depositAddress,
              merchant.merchantId,
              customer.id,
              customer.deposit_address,
            ),
          },
          beneficiary: { id: beneficiary.id, currency: beneficiary.currency },
          tokens: payoutTokens(this.config, merchant.mode),
        },
        now: this.aggregates.now(),
      },
      command.commandId,
    );
    return { id, revision };
  }
}
