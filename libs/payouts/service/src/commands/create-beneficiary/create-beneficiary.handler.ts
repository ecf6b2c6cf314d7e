import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CommandHandler } from '@stablepay/commands';
import {
  type CreateBeneficiaryCommand,
  PAYOUTS_COMMANDS,
  type PayoutsCommandResult,
} from '@stablepay/payouts-api';
import { parseCreateBeneficiary } from '@stablepay/payouts-domain';
import { canonicalJson, derivedId } from '@stablepay/util';
import { PayoutsAggregates } from '../../aggregates';
import { BankAccountVault } from '../../bank-accounts';

/**
 * Use case: register a bank account receiving fiat (POST /beneficiaries). The account number is validated, then
 * sealed into the vault, then the creation fact (last4 and fingerprint only) is appended: a fact never names an
 * account the vault does not hold.
 */
@Controller()
export class CreateBeneficiaryHandler {
  constructor(
    @Inject(PayoutsAggregates) private readonly aggregates: PayoutsAggregates,
    @Inject(BankAccountVault) private readonly vault: BankAccountVault,
  ) {}

  @CommandHandler(PAYOUTS_COMMANDS.createBeneficiary)
  async handle(@Payload() command: CreateBeneficiaryCommand): Promise<PayoutsCommandResult> {
    const { merchantId, mode } = command.merchant;
    const id = derivedId(
      'bnf',
      [merchantId, mode, command.commandId, canonicalJson(command.input)].join('\u0000'),
    );
    // Bad input is a 400 before anything is written.
    const { account } = parseCreateBeneficiary(command.input);
    const now = this.aggregates.now();
    await this.vault.store(id, merchantId, account, now);
    const { revision } = await this.aggregates.beneficiary(
      id,
      { merchantId, mode },
      {
        type: 'CreateBeneficiary',
        id,
        input: command.input,
        accountFingerprint: this.vault.fingerprint(account),
        now,
      },
      command.commandId,
    );
    return { id, revision };
  }
}
