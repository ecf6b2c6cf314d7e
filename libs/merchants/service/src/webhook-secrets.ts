import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { Clock } from '@stablepay/util';
import { MERCHANTS_CONFIG, type MerchantsConfig } from './merchants.config';
import type { MerchantSettingsRow } from './settings.reader';

export interface ActiveWebhookSecrets {
  readonly current: string;
  /** Present only inside the 24-hour rotation window. */
  readonly previous?: string;
}

/** Opens the sealed secrets a delivery must be signed with right now (for the webhook dispatcher). */
@Injectable()
export class WebhookSecrets {
  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(MERCHANTS_CONFIG) private readonly config: MerchantsConfig,
  ) {}

  async active(settings: MerchantSettingsRow, clock: Clock): Promise<ActiveWebhookSecrets | null> {
    if (!settings.webhook_secret_id) return null;
    const current = await this.open(settings.webhook_secret_id);
    const inWindow =
      settings.previous_webhook_secret_id !== null &&
      settings.previous_secret_expires_at !== null &&
      new Date(settings.previous_secret_expires_at).getTime() > clock.now().getTime();
    if (!inWindow || !settings.previous_webhook_secret_id) return { current };
    return { current, previous: await this.open(settings.previous_webhook_secret_id) };
  }

  private async open(secretId: string): Promise<string> {
    const rows: Array<{ sealed_secret: string }> = await this.dataSource.query(
      'SELECT sealed_secret FROM webhook_secrets WHERE secret_id = $1',
      [secretId],
    );
    const row = rows[0];
    if (!row) throw new Error(`webhook secret ${secretId} is missing`);
    return this.config.secretBox.open(row.sealed_secret, secretId);
  }
}
