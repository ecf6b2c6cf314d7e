import { Inject, Injectable } from '@nestjs/common';
import type { RotateWebhookSecretCommand, RotateWebhookSecretResult } from '@stablepay/merchants-api';
import { MerchantCommands } from '../../merchant-commands';

/** Use case: the merchant rotates its webhook secret (POST /settings/webhook/secret). */
@Injectable()
export class RotateWebhookSecretHandler {
  constructor(@Inject(MerchantCommands) private readonly commands: MerchantCommands) {}

  async handle(command: RotateWebhookSecretCommand): Promise<RotateWebhookSecretResult> {
    const { row, secret, previousSecretExpiresAt } = await this.commands.rotateWebhookSecret(
      command.merchant.merchantId,
      command.commandId,
    );
    return { id: row.merchant_id, revision: row.revision, secret, previousSecretExpiresAt };
  }
}
