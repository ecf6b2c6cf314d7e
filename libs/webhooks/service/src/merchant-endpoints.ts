import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { CLOCK } from '@stablepay/aggregate';
import {
  type ActiveWebhookSecrets,
  type MerchantSettingsRow,
  WebhookSecrets,
} from '@stablepay/merchants-service';
import type { Clock } from '@stablepay/util';

/** What the dispatcher needs of a merchant's settings to record and deliver its events. */
export interface MerchantEndpoint {
  readonly merchantId: string;
  readonly url: string | null;
  /** null = every type. */
  readonly eventTypes: readonly string[] | null;
  readonly hasSecret: boolean;
  readonly row: MerchantSettingsRow;
}

/**
 * Reads the merchants scope's settings read model (the `merchant_settings` table the gateway's projection keeps;
 * one PostgreSQL database in every deployment) and opens the signing secrets through the merchants scope's
 * `WebhookSecrets`, which owns the 24-hour rotation window and the one-slot rule. Settings are read fresh for
 * every claim batch (a changed URL or a rotation applies to the next attempt); opened secrets are cached by
 * their immutable ids.
 */
@Injectable()
export class MerchantEndpoints {
  private readonly secretsCache = new Map<string, ActiveWebhookSecrets>();

  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(WebhookSecrets) private readonly secrets: WebhookSecrets,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async forMerchants(merchantIds: readonly string[]): Promise<Map<string, MerchantEndpoint>> {
    const unique = [...new Set(merchantIds)];
    if (unique.length === 0) return new Map();
    const rows: MerchantSettingsRow[] = await this.dataSource.query(
      'SELECT * FROM merchant_settings WHERE merchant_id = ANY($1::text[])',
      [unique],
    );
    return new Map(
      rows.map((row) => [
        row.merchant_id,
        {
          merchantId: row.merchant_id,
          url: row.webhook_url,
          eventTypes: row.webhook_event_types,
          hasSecret: row.webhook_secret_id !== null,
          row,
        },
      ]),
    );
  }

  /** The secrets that sign a delivery made now: the current one, and the previous one inside its window. */
  async activeSecrets(endpoint: MerchantEndpoint): Promise<ActiveWebhookSecrets | null> {
    const row = endpoint.row;
    if (!row.webhook_secret_id) return null;
    const now = this.clock.now();
    const inWindow =
      row.previous_webhook_secret_id !== null &&
      row.previous_secret_expires_at !== null &&
      new Date(row.previous_secret_expires_at).getTime() > now.getTime();
    const key = `${row.webhook_secret_id}|${inWindow ? (row.previous_webhook_secret_id ?? '') : ''}`;
    const cached = this.secretsCache.get(key);
    if (cached) return cached;
    const opened = await this.secrets.active(row, this.clock);
    if (!opened) return null;
    if ((opened.previous !== undefined) === inWindow) {
      if (this.secretsCache.size > 10_000) this.secretsCache.clear();
      this.secretsCache.set(key, opened);
    }
    return opened;
  }
}
