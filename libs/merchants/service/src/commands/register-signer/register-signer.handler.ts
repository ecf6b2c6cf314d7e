import { Inject, Injectable } from '@nestjs/common';
import type { RegisterSignerCommand, MerchantCommandResult } from '@stablepay/merchants-api';
import { MerchantCommands } from '../../merchant-commands';

/** Use case: the merchant registers its signer, optionally with a settlement address (POST /settings). */
@Injectable()
export class RegisterSignerHandler {
  constructor(@Inject(MerchantCommands) private readonly commands: MerchantCommands) {}

  async handle(command: RegisterSignerCommand): Promise<MerchantCommandResult> {
    const row = await this.commands.registerSigner(
      command.merchant.merchantId,
      command.merchantSigner,
      command.settlementAddress,
    );
    return { id: row.merchant_id, revision: row.revision };
  }
}
