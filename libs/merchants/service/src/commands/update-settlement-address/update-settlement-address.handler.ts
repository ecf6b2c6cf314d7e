import { Inject, Injectable } from '@nestjs/common';
import type { UpdateSettlementAddressCommand, MerchantCommandResult } from '@stablepay/merchants-api';
import { MerchantCommands } from '../../merchant-commands';

/** Use case: the merchant changes its settlement address (PUT /settings). */
@Injectable()
export class UpdateSettlementAddressHandler {
  constructor(@Inject(MerchantCommands) private readonly commands: MerchantCommands) {}

  async handle(command: UpdateSettlementAddressCommand): Promise<MerchantCommandResult> {
    const row = await this.commands.updateSettlementAddress(
      command.merchant.merchantId,
      command.settlementAddress,
    );
    return { id: row.merchant_id, revision: row.revision };
  }
}
