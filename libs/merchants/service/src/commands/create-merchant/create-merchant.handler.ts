import { Inject, Injectable } from '@nestjs/common';
import type { CreateMerchantCommand, CreateMerchantResult } from '@stablepay/merchants-api';
import { MerchantCommands } from '../../merchant-commands';

/** Use case: the operator creates a merchant and its first API key (POST /admin/merchants). */
@Injectable()
export class CreateMerchantHandler {
  constructor(@Inject(MerchantCommands) private readonly commands: MerchantCommands) {}

  async handle(command: CreateMerchantCommand): Promise<CreateMerchantResult> {
    const { row, apiKey } = await this.commands.createMerchant({
      name: command.name,
      mode: command.mode,
      settlementMode: command.settlementMode,
      ...(command.commandId !== undefined ? { commandId: command.commandId } : {}),
      ...(command.attemptStartedAt !== undefined
        ? { attemptStartedAt: new Date(command.attemptStartedAt) }
        : {}),
    });
    return { id: row.merchant_id, revision: row.revision, apiKey };
  }
}
