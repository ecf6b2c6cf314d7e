import { Inject, Injectable } from '@nestjs/common';
import type { DeclarePauserCommand, MerchantCommandResult } from '@stablepay/merchants-api';
import { MerchantCommands } from '../../merchant-commands';

/** Use case: the merchant declares its pauser, proving control with a signature (POST /settings/pauser). */
@Injectable()
export class DeclarePauserHandler {
  constructor(@Inject(MerchantCommands) private readonly commands: MerchantCommands) {}

  async handle(command: DeclarePauserCommand): Promise<MerchantCommandResult> {
    const row = await this.commands.declarePauser(command.merchant.merchantId, command.merchant.mode, {
      merchantPauser: command.merchantPauser,
      signature: command.signature,
      acknowledgeSharedPauserRisk: command.acknowledgeSharedPauserRisk,
    });
    return { id: row.merchant_id, revision: row.revision };
  }
}
