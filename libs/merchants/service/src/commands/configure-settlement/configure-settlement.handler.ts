import { Inject, Injectable } from '@nestjs/common';
import type { ConfigureSettlementCommand, MerchantCommandResult } from '@stablepay/merchants-api';
import { MerchantCommands } from '../../merchant-commands';

/** Use case: the merchant configures settlement: address and/or fiat payout details (PUT /payments/settlement). */
@Injectable()
export class ConfigureSettlementHandler {
  constructor(@Inject(MerchantCommands) private readonly commands: MerchantCommands) {}

  async handle(command: ConfigureSettlementCommand): Promise<MerchantCommandResult> {
    const row = await this.commands.configureSettlement(command.merchant.merchantId, {
      ...(command.settlementAddress !== undefined ? { settlementAddress: command.settlementAddress } : {}),
      ...(command.fiat !== undefined ? { fiat: command.fiat } : {}),
    });
    return { id: row.merchant_id, revision: row.revision };
  }
}
