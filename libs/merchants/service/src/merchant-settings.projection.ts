import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { ModuleRef } from '@nestjs/core';
import { EventEmitter } from 'node:events';
import { DataSource, type EntityManager } from 'typeorm';
import { Projections } from '@stablepay/aggregate';
import { type BusMessage, type ProjectionRunner, topicForCategory } from '@stablepay/event-bus';
import { MERCHANT_CATEGORY, type MerchantEvent } from '@stablepay/merchants-domain';
import { InvalidatedCache } from '@stablepay/util';
import { recordSettlementAddressChange } from './settlement-address-history';

export const MERCHANT_TOPIC = topicForCategory(MERCHANT_CATEGORY);
export const MERCHANT_SETTINGS_PROJECTION = 'merchants.settings-projection';

/**
 * merchant-<id> events -> merchant_settings and api_keys rows, in batches (one transaction each) through the
 * platform's ProjectionRunner, which parks a merchant's stream on an event it cannot apply while every other
 * merchant's events go on. Idempotent by stream revision: each row stores the revision it reflects and an event
 * at or below it is skipped, so redelivery changes nothing.
 */
@Injectable()
export class MerchantSettingsProjection implements OnApplicationBootstrap, OnApplicationShutdown {
  private runner?: ProjectionRunner;
  /**
   * Emits `<merchantId>` after a row changed, so read-your-writes waits wake at once in this process, and
   * `changed` with the merchant id for caches.
   */
  readonly changes = new EventEmitter().setMaxListeners(0);

  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(Projections) private readonly projections: Projections,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.runner = await this.projections.start({
      name: MERCHANT_SETTINGS_PROJECTION,
      topics: [MERCHANT_TOPIC],
      apply: (em, message) => this.applyMessage(em, message),
      onCommitted: (changed) => {
        for (const message of changed) this.emitChange(message);
      },
    });
  }

  async onApplicationShutdown(): Promise<void> {
    await this.projections.stop(this.runner);
  }

  /** Applies one message in its own transaction (tests and tools; the runner batches). */
  async apply(message: BusMessage): Promise<void> {
    const applied = await this.dataSource.transaction((em) => this.applyMessage(em, message));
    if (applied) this.emitChange(message);
  }

  /** `<merchantId>` wakes read-your-writes waits; `changed` (with the id) lets caches drop the merchant. */
  private emitChange(message: BusMessage): void {
    const merchantId = merchantIdOf(message);
    this.changes.emit(merchantId, message.revision);
    this.changes.emit('changed', merchantId);
  }

  private applyMessage(em: EntityManager, message: BusMessage): Promise<boolean> {
    const event = { type: message.type, data: message.data } as MerchantEvent;
    return this.applyIn(em, merchantIdOf(message), message.revision, event);
  }

  private async applyIn(
    em: EntityManager,
    merchantId: string,
    revision: number,
    event: MerchantEvent,
  ): Promise<boolean> {
    if (event.type === 'MerchantCreated.v1') {
      const d = event.data;
      const inserted: unknown[] = await em.query(
        `INSERT INTO merchant_settings (merchant_id, mode, name, display_name, settlement_mode, revision, created_at, updated_at)
         VALUES ($1, $2, $3, $3, $4, $5, $6, $6) ON CONFLICT (merchant_id) DO NOTHING RETURNING merchant_id`,
        [merchantId, d.mode, d.name, d.settlementMode, revision, d.createdAt],
      );
      await em.query(
        `INSERT INTO api_keys (key_hash, merchant_id, mode, hint, created_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
        [d.apiKeyHash, merchantId, d.mode, d.apiKeyHint, d.createdAt],
      );
      return inserted.length > 0;
    }
    const set: Record<string, unknown> = {};
    let at: string;
    switch (event.type) {
      case 'MerchantApiKeyReissued.v1':
        at = event.data.reissuedAt;
        break;
      case 'MerchantSignerRegistered.v1':
        set['merchant_signer'] = event.data.merchantSigner;
        at = event.data.registeredAt;
        break;
      case 'SettlementAddressChanged.v1':
        set['settlement_address'] = event.data.settlementAddress;
        at = event.data.changedAt;
        break;
      case 'MerchantProfileUpdated.v1': {
        const d = event.data;
        if (d.displayName !== undefined) set['display_name'] = d.displayName;
        if (d.webhookUrl !== undefined) set['webhook_url'] = d.webhookUrl;
        if (d.backgroundColor !== undefined) set['background_color'] = d.backgroundColor;
        if (d.primaryColor !== undefined) set['primary_color'] = d.primaryColor;
        if (d.webhookEventTypes !== undefined)
          set['webhook_event_types'] =
            d.webhookEventTypes === null ? null : JSON.stringify(d.webhookEventTypes);
        at = d.updatedAt;
        break;
      }
      case 'WebhookSecretIssued.v1':
        set['webhook_secret_id'] = event.data.secretId;
        set['webhook_secret_fingerprint'] = event.data.fingerprint;
        at = event.data.issuedAt;
        break;
      case 'WebhookSecretRotated.v1':
        set['webhook_secret_id'] = event.data.secretId;
        set['webhook_secret_fingerprint'] = event.data.fingerprint;
        set['previous_webhook_secret_id'] = event.data.previousSecretId;
        set['previous_secret_expires_at'] = event.data.previousSecretExpiresAt;
        at = event.data.rotatedAt;
        break;
      case 'PauserDeclared.v1':
        set['merchant_pauser'] = event.data.merchantPauser;
        set['shared_pauser_risk_acknowledged'] = event.data.sharedPauserRiskAcknowledged;
        at = event.data.declaredAt;
        break;
      case 'SubscriptionManagerDeployed.v1':
        set['subscription_manager_address'] = event.data.address;
        at = event.data.deployedAt;
        break;
      case 'FiatSettlementConfigured.v1': {
        const fiat = event.data.fiat;
        set['fiat_currency'] = fiat?.currency ?? null;
        set['fiat_beneficiary_name'] = fiat?.beneficiaryName ?? null;
        set['fiat_bank_name'] = fiat?.bankName ?? null;
        set['fiat_account_number'] = fiat?.accountNumber ?? null;
        set['fiat_bank_code'] = fiat?.bankCode ?? null;
        set['fiat_country'] = fiat?.country ?? null;
        set['fiat_configured_at'] = event.data.configuredAt;
        at = event.data.configuredAt;
        break;
      }
      case 'MerchantBetaFeaturesSet.v1':
        // Merged into what is set: the event carries only the features it changed.
        set['beta_features'] = JSON.stringify(event.data.features);
        at = event.data.setAt;
        break;
      default:
        // Unknown (newer) event types are skipped but still advance the revision.
        at = new Date().toISOString();
    }
    const columns = Object.keys(set);
    const params: unknown[] = [merchantId, revision, at, ...Object.values(set)];
    const assignments = columns.map((c, i) =>
      c === 'beta_features' ? `${c} = ${c} || $${i + 4}::jsonb` : `${c} = $${i + 4}`,
    );
    const updated: unknown = await em.query(
      `UPDATE merchant_settings SET ${[...assignments, 'revision = $2', 'updated_at = $3'].join(', ')}
       WHERE merchant_id = $1 AND revision < $2 RETURNING merchant_id`,
      params,
    );
    // TypeORM returns [rows, rowCount] for UPDATE on Postgres.
    const applied = Array.isArray(updated) && typeof updated[1] === 'number' ? updated[1] > 0 : false;
    // Behind the revision guard: the history is written once per change, in stream order (a redelivered change,
    // even one older than the address held now, must not reopen it).
    if (applied && event.type === 'SettlementAddressChanged.v1')
      await recordSettlementAddressChange(em, merchantId, event.data);
    // Behind the revision guard too: a redelivered reissue must not bring back a key a later one replaced.
    if (applied && event.type === 'MerchantApiKeyReissued.v1') {
      await em.query('DELETE FROM api_keys WHERE key_hash = $1 AND merchant_id = $2', [
        event.data.replacedApiKeyHash,
        merchantId,
      ]);
      await em.query(
        `INSERT INTO api_keys (key_hash, merchant_id, mode, hint, created_at)
         SELECT $1, merchant_id, mode, $3, $4 FROM merchant_settings WHERE merchant_id = $2 ON CONFLICT DO NOTHING`,
        [event.data.apiKeyHash, merchantId, event.data.apiKeyHint, event.data.reissuedAt],
      );
    }
    return applied;
  }
}

function merchantIdOf(message: BusMessage): string {
  return message.key.slice(MERCHANT_CATEGORY.length + 1);
}

/**
 * A cache of what a process derives from `merchant_settings`, keyed and grouped by merchant, for a process where
 * this projection runs: it drops a merchant's entries the moment the projection commits a change for that merchant,
 * in the same tick, before any read-your-writes wait on that change resumes. `ttlMs` bounds a change another
 * replica projected. Undefined in a process without the merchants module (no change would reach the cache there:
 * read every time).
 */
export function merchantSettingsCache<Value>(
  moduleRef: ModuleRef,
  options: { readonly ttlMs: number; readonly maxEntries: number },
): InvalidatedCache<Value> | undefined {
  let projection: MerchantSettingsProjection;
  try {
    projection = moduleRef.get(MerchantSettingsProjection, { strict: false });
  } catch {
    return undefined;
  }
  const cache = new InvalidatedCache<Value>(options);
  projection.changes.on('changed', (merchantId: string) => cache.invalidate(merchantId));
  return cache;
}
