import { Inject, Injectable } from '@nestjs/common';
import type { UpdateProfileCommand, UpdateProfileResult } from '@stablepay/merchants-api';
import { MerchantCommands } from '../../merchant-commands';
import { MERCHANTS_CONFIG, type MerchantsConfig } from '../../merchants.config';
import { requireKnownEventTypes } from '../../webhook-event-types';

/**
 * Use case: the merchant edits its profile: display name, branding colors, webhook URL and event types
 * (PATCH /settings). The first webhook URL issues the webhook secret, answered once.
 */
@Injectable()
export class UpdateProfileHandler {
  constructor(
    @Inject(MerchantCommands) private readonly commands: MerchantCommands,
    @Inject(MERCHANTS_CONFIG) private readonly config: MerchantsConfig,
  ) {}

  async handle(command: UpdateProfileCommand): Promise<UpdateProfileResult> {
    const { row, issuedSecret } = await this.commands.updateProfile(command.merchant.merchantId, {
      ...(command.displayName !== undefined ? { displayName: command.displayName } : {}),
      ...(command.webhookUrl !== undefined ? { webhookUrl: command.webhookUrl } : {}),
      ...(command.backgroundColor !== undefined ? { backgroundColor: command.backgroundColor } : {}),
      ...(command.primaryColor !== undefined ? { primaryColor: command.primaryColor } : {}),
      ...(command.webhookEventTypes !== undefined
        ? {
            webhookEventTypes: requireKnownEventTypes(
              command.webhookEventTypes,
              this.config.webhookEventCatalogue,
            ),
          }
        : {}),
    });
    return { id: row.merchant_id, revision: row.revision, ...(issuedSecret ? { issuedSecret } : {}) };
  }
}
