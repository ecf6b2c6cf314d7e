import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CommandHandler } from '@stablepay/commands';
import {
  type CreateBeneficiaryCommand,
  PAYOUTS_COMMANDS,
  type PayoutsCommandResult,
} from '@stablepay/payouts-api';
import { canonicalJson, derivedId } from '@stablepay/util';
import { PayoutsAggregates } from '../../aggregates';

/** Use case: register a bank account receiving fiat (POST /beneficiaries). */
@Controller()
export class CreateBeneficiaryHandler {
  constructor(@Inject(PayoutsAggregates) private readonly aggregates: PayoutsAggregates) {}

  @CommandHandler(PAYOUTS_COMMANDS.createBeneficiary)
  async handle(@Payload() command: CreateBeneficiaryCommand): Promise<PayoutsCommandResult> {
    const { merchantId, mode } = command.merchant;
    const id = derivedId(
      'bnf',
      [merchantId, mode, command.commandId, canonicalJson(command.input)].join('\u0000'),
    );
    const { revision } = await this.aggregates.beneficiary(
      id,
      { merchantId, mode },
      { type: 'CreateBeneficiary', id, input: command.input, now: this.aggregates.now() },
      command.commandId,
    );
    return { id, revision };
  }
}
