import { Inject, Injectable, Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type Clock, DomainError, SecretUnreadableError } from '@stablepay/util';
import { MERCHANTS_CONFIG, type MerchantsConfig } from './merchants.config';
import type { MerchantSettingsRow } from './settings.reader';

export interface ActiveWebhookSecrets {
  readonly current: string;
  /** Present only inside the 24-hour rotation window. */
  readonly previous?: string;
}

/**
 * Opens the sealed secrets a delivery must be signed with right now (for the webhook dispatcher).
 *
 * A sealed secret no configured key opens (the encryption key was replaced without keeping the old one in
 * WEBHOOK_SECRET_ENCRYPTION_KEY_PREVIOUS) is an operator's fault, not the merchant's: the previous secret is then left
 * out (deliveries are signed with the current one only, as after its window) and logged; an unreadable current secret
 * is a 500 with its own code and a message that says what fixes it, never a bare decryption error.
 */
@Injectable()
export class WebhookSecrets {
  private readonly logger = new Logger('webhook-secrets');

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
    try {
      return { current, previous: await this.open(settings.previous_webhook_secret_id) };
    } catch (error) {
      if (!(error instanceof DomainError && error.code === 'webhook_secret_unreadable')) throw error;
      this.logger.error(
        `merchant ${settings.merchant_id}: the previous webhook secret ${settings.previous_webhook_secret_id} cannot be opened with the configured keys; signing with the current secret only`,
      );
      return { current };
    }
  }

  /** The secret `secretId` as issued (what a retried rotation answers again). */
  async open(secretId: string): Promise<string> {
    const rows: Array<{ sealed_secret: string }> = await this.dataSource.query(
      'SELECT sealed_secret FROM webhook_secrets WHERE secret_id = $1',
      [secretId],
    );
    const row = rows[0];
    if (!row) throw new Error(`webhook secret ${secretId} is missing`);
    try {
      const { plaintext, resealed } = this.config.secretBox.openAndReseal(row.sealed_secret, secretId);
      if (resealed !== null) {
        // Opened with a previous key: sealed again under the current one, so the old key can be retired.
        await this.dataSource.query(
          'UPDATE webhook_secrets SET sealed_secret = $2 WHERE secret_id = $1 AND sealed_secret = $3',
          [secretId, resealed, row.sealed_secret],
        );
        this.logger.log(`webhook secret ${secretId} re-sealed under the current encryption key`);
      }
      return plaintext;
    } catch (error) {
      if (!(error instanceof SecretUnreadableError)) throw error;
      throw new DomainError({
        type: 'api_error',
        status: 500,
        code: 'webhook_secret_unreadable',
        message: `The webhook secret ${secretId} cannot be opened with the service's configured encryption keys (the key was replaced without keeping the old one in WEBHOOK_SECRET_ENCRYPTION_KEY_PREVIOUS). The operator can restore it; rotating the secret (POST /settings/webhook/secret) replaces it.`,
      });
    }
  }
}
