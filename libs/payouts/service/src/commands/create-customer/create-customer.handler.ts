import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CommandHandler } from '@stablepay/commands';
import {
  type CreateCustomerCommand,
  PAYOUTS_COMMANDS,
  type PayoutsCommandResult,
} from '@stablepay/payouts-api';
import { canonicalJson, derivedId } from '@stablepay/util';
import { PayoutsAggregates } from '../../aggregates';
import { depositAddresses } from '../../offering';
import { PAYOUTS_CONFIG, type PayoutsConfig } from '../../payouts.config';
import {
  CUSTOMER_DEPOSIT_ADDRESS,
  type CustomerDepositAddress,
} from '../../providers/customer-deposit-address';
import { PAYOUTS_LIVE_PROVIDERS, requireLivePayoutProviders } from '../../providers/live-payouts';

/** Use case: create a customer (POST /customers): kyc_pending, its first KYC session and its deposit address. */
@Controller()
export class CreateCustomerHandler {
  constructor(
    @Inject(PayoutsAggregates) private readonly aggregates: PayoutsAggregates,
    @Inject(PAYOUTS_CONFIG) private readonly config: PayoutsConfig,
    @Inject(PAYOUTS_LIVE_PROVIDERS) private readonly liveProviders: boolean,
    @Inject(CUSTOMER_DEPOSIT_ADDRESS) private readonly depositAddress: CustomerDepositAddress,
  ) {}

  @CommandHandler(PAYOUTS_COMMANDS.createCustomer)
  async handle(@Payload() command: CreateCustomerCommand): Promise<PayoutsCommandResult> {
    const { merchantId, mode } = command.merchant;
    requireLivePayoutProviders(mode, this.liveProviders);
    // Ids derive from the command id and the parameters: a retried create names the customer it first created.
    const seed = [merchantId, mode, command.commandId, canonicalJson(command.input)].join('\u0000');
    const id = derivedId('cus', seed);
    const { revision } = await this.aggregates.customer(
      id,
      { merchantId, mode },
      {
        type: 'CreateCustomer',
        id,
        input: command.input,
        depositAddresses: depositAddresses(this.config, mode, this.depositAddress(merchantId, id)),
        kycSessionId: derivedId('kycs', `${seed}\u0000kyc`),
        hostedUrl: this.config.hostedUrl ?? `${command.origin}/hosted`,
        now: this.aggregates.now(),
      },
      command.commandId,
    );
    return { id, revision };
  }
}
