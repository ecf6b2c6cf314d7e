import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { DataSource } from 'typeorm';
import { CLOCK } from '@stablepay/aggregate';
import {
  type ActiveWebhookSecrets,
  merchantSettingsCache,
  type MerchantSettingsRow,
  WebhookSecrets,
} from '@stablepay/merchants-service';
import type { Clock, InvalidatedCache } from '@stablepay/util';

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
 * `WebhookSecrets`, which owns the 24-hour rotation window and the one-slot rule. Opened secrets are cached by
 * their immutable ids.
 */
@Injectable()
export class MerchantEndpoints implements OnModuleInit {
  private readonly secretsCache = new Map<string, ActiveWebhookSecrets>();
  /**
   * Secrets being opened now, by the same key: the attempts that start together when a claim comes back (up to the
   * concurrency, all for a few merchants) share one read and decryption instead of one each.
   */
  private readonly opening = new Map<string, Promise<ActiveWebhookSecrets | null>>();
  /** Cache misses to be read in one statement (see loadBatched), and the reads in flight by merchant. */
  private nextBatch:
    { readonly ids: string[]; readonly read: Promise<Map<string, MerchantEndpoint>> } | undefined;
  private readonly loading = new Map<string, Promise<MerchantEndpoint | undefined>>();
  /** See cachedForMerchants. */
  private recordingCache: InvalidatedCache<MerchantEndpoint> | undefined;

  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(WebhookSecrets) private readonly secrets: WebhookSecrets,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(ModuleRef) private readonly moduleRef: ModuleRef,
  ) {}

  onModuleInit(): void {
    this.recordingCache = merchantSettingsCache(this.moduleRef, { ttlMs: 1_000, maxEntries: 10_000 });
  }

  /**
   * The recorder's read (which events the merchant would get at all) and the dispatcher's (where and how to send a
   * claimed batch): from a cache where the settings projection runs in this process. The projection drops a
   * merchant at once when it commits a change, so a URL change or a secret rotation made through this process
   * applies to the next claim as a fresh read would; one projected by another replica within 1 s. Otherwise most
   * creates, and every claim, would pay this read. Without the projection in this process, read fresh.
   */
  async cachedForMerchants(merchantIds: readonly string[]): Promise<Map<string, MerchantEndpoint>> {
    const cache = this.recordingCache;
    if (!cache) return this.forMerchants(merchantIds);
    const unique = [...new Set(merchantIds)];
    const found = await Promise.all(
      unique.map((merchantId) =>
        cache.get(merchantId, async () => {
          const value = await this.loadBatched(merchantId);
          return value ? { value, group: merchantId } : undefined;
        }),
      ),
    );
    return new Map(found.flatMap((e) => (e ? [[e.merchantId, e] as const] : [])));
  }

  /**
   * One merchant's settings for the cache, read together with every other merchant missed in the same turn (a
   * claim's merchants expire together, so each second the cache would otherwise send one read per merchant). A
   * read already sent is not joined: it may predate a change the cache was just told about.
   */
  private loadBatched(merchantId: string): Promise<MerchantEndpoint | undefined> {
    let batch = this.nextBatch;
    if (!batch) {
      const ids: string[] = [];
      const read = Promise.resolve().then(() => {
        this.nextBatch = undefined;
        return this.forMerchants(ids);
      });
      batch = { ids, read };
      this.nextBatch = batch;
    }
    batch.ids.push(merchantId);
    return batch.read.then((endpoints) => endpoints.get(merchantId));
  }

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
    const pending = this.opening.get(key);
    if (pending) return pending;
    const opening = this.secrets.active(row, this.clock).then((opened) => {
      if (opened && (opened.previous !== undefined) === inWindow) {
        if (this.secretsCache.size > 10_000) this.secretsCache.clear();
        this.secretsCache.set(key, opened);
      }
      return opened;
    });
    this.opening.set(key, opening);
    try {
      return await opening;
    } finally {
      this.opening.delete(key);
    }
  }
}
