import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { verifyMessage } from 'ethers';
import { randomBytes } from 'node:crypto';
import { CLOCK, handleCommand } from '@stablepay/aggregate';
import { EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore, Mode } from '@stablepay/event-store';
import { parseAddress } from '@stablepay/evm';
import { apiKeyHint, generateApiKey, hashApiKey, parseApiKey } from '@stablepay/http';
import {
  type FiatSettlementDetails,
  type MerchantCommand,
  type MerchantEvent,
  merchantDecider,
  merchantStreamId,
  pauserDeclarationMessage,
  type SettlementMode,
} from '@stablepay/merchants-domain';
import { type Clock, fingerprint, invalidRequest, newId, validationError } from '@stablepay/util';
import { ContractSignatureVerifier } from './contract-signatures';
import { MERCHANTS_CONFIG, type MerchantsConfig } from './merchants.config';
import { SettingsReader, type MerchantSettingsRow } from './settings.reader';
import { validateWebhookUrl } from './webhook-url';

/** `whsec_` + 32 random bytes base64url: the secret as issued, used verbatim as the HMAC key. */
function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

export interface CreatedMerchant {
  readonly row: MerchantSettingsRow;
  readonly apiKey: string;
}

/** The command side of the merchant aggregate: load, decide, append; then wait for the read model. */
@Injectable()
export class MerchantCommands {
  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(MERCHANTS_CONFIG) private readonly config: MerchantsConfig,
    @Inject(SettingsReader) private readonly reader: SettingsReader,
    @Inject(ContractSignatureVerifier) private readonly contractSignatures: ContractSignatureVerifier,
  ) {}

  private async run(merchantId: string, command: MerchantCommand, mode?: Mode): Promise<MerchantSettingsRow> {
    return (await this.execute(merchantId, command, mode)).row;
  }

  /**
   * The command's own events beside the read model at (at least) its revision. The row may already hold a later
   * command's changes (another request on the same merchant appended right after), so what this command did is
   * read from its events, never from the row.
   */
  private async execute(
    merchantId: string,
    command: MerchantCommand,
    mode?: Mode,
  ): Promise<{ row: MerchantSettingsRow; events: readonly MerchantEvent[] }> {
    const result = await handleCommand(this.store, merchantStreamId(merchantId), merchantDecider, command, {
      metadata: { merchantId, ...(mode ? { mode } : {}), occurredAt: this.clock.now().toISOString() },
    });
    return { row: await this.reader.getAtLeast(merchantId, result.revision), events: result.newEvents };
  }

  async createMerchant(input: {
    name: string;
    mode: Mode;
    settlementMode: SettlementMode;
    apiKey?: string;
  }): Promise<CreatedMerchant> {
    const apiKey = input.apiKey ?? generateApiKey(input.mode);
    const parsed = parseApiKey(apiKey);
    if (!parsed || parsed.mode !== input.mode)
      throw validationError('api_key', `api_key must be an sk_${input.mode}_ key.`);
    const now = this.clock.now();
    const merchantId = newId('mer', now);
    const row = await this.run(
      merchantId,
      {
        type: 'CreateMerchant',
        merchantId,
        name: input.name,
        mode: input.mode,
        settlementMode: input.settlementMode,
        apiKeyHash: hashApiKey(apiKey),
        apiKeyHint: apiKeyHint(apiKey),
        now,
      },
      input.mode,
    );
    return { row, apiKey };
  }

  registerSigner(
    merchantId: string,
    merchantSigner: string,
    settlementAddress?: string,
  ): Promise<MerchantSettingsRow> {
    return this.run(merchantId, {
      type: 'RegisterSigner',
      merchantSigner: parseAddress(merchantSigner, 'merchant_signer', { nonZero: true }),
      ...(settlementAddress !== undefined
        ? { settlementAddress: parseAddress(settlementAddress, 'settlement_address', { nonZero: true }) }
        : {}),
      now: this.clock.now(),
    });
  }

  updateSettlementAddress(merchantId: string, settlementAddress: string): Promise<MerchantSettingsRow> {
    return this.run(merchantId, {
      type: 'UpdateSettlementAddress',
      settlementAddress: parseAddress(settlementAddress, 'settlement_address', { nonZero: true }),
      now: this.clock.now(),
    });
  }

  /** Returns the row and, when this update issued the first secret, the secret itself (shown once). */
  async updateProfile(
    merchantId: string,
    patch: {
      displayName?: string;
      webhookUrl?: string | null;
      backgroundColor?: string | null;
      primaryColor?: string | null;
      webhookEventTypes?: string[] | null;
    },
  ): Promise<{ row: MerchantSettingsRow; issuedSecret?: string }> {
    const webhookUrl =
      patch.webhookUrl === undefined || patch.webhookUrl === null
        ? patch.webhookUrl
        : await validateWebhookUrl(patch.webhookUrl, this.config.allowLocalWebhooks, this.config.webhookDns);
    const before = await this.reader.get(merchantId);
    const secret = generateWebhookSecret();
    const secretId = newId('whs', this.clock.now());
    const willIssue = typeof webhookUrl === 'string' && before.webhook_secret_id === null;
    // The sealed secret is stored before the event that names it; if the append then fails, an unused row
    // remains and names nothing.
    if (willIssue) await this.storeSecret(merchantId, secretId, secret);
    const { row, events } = await this.execute(merchantId, {
      type: 'UpdateProfile',
      ...(patch.displayName !== undefined ? { displayName: patch.displayName } : {}),
      ...(webhookUrl !== undefined ? { webhookUrl } : {}),
      ...(patch.backgroundColor !== undefined ? { backgroundColor: patch.backgroundColor } : {}),
      ...(patch.primaryColor !== undefined ? { primaryColor: patch.primaryColor } : {}),
      ...(patch.webhookEventTypes !== undefined ? { webhookEventTypes: patch.webhookEventTypes } : {}),
      candidateSecret: { secretId, fingerprint: fingerprint(secret) },
      now: this.clock.now(),
    });
    // From its own events: a rotation landing right after may already have replaced the issued secret in the row.
    const issued = events.some((e) => e.type === 'WebhookSecretIssued.v1' && e.data.secretId === secretId);
    return issued ? { row, issuedSecret: secret } : { row };
  }

  /**
   * Rotations of one merchant serialize on its stream (each retried on top of the one that won), so each one
   * answers the secret it issued and the expiry its own event gave the secret it replaced.
   */
  async rotateWebhookSecret(
    merchantId: string,
  ): Promise<{ row: MerchantSettingsRow; secret: string; previousSecretExpiresAt: Date }> {
    const before = await this.reader.get(merchantId);
    if (before.webhook_secret_id === null) {
      throw invalidRequest(
        'No webhook secret exists yet: set a webhook_url with PATCH /settings first.',
        'webhook_not_configured',
      );
    }
    const secret = generateWebhookSecret();
    const secretId = newId('whs', this.clock.now());
    await this.storeSecret(merchantId, secretId, secret);
    const { row, events } = await this.execute(merchantId, {
      type: 'RotateWebhookSecret',
      secret: { secretId, fingerprint: fingerprint(secret) },
      now: this.clock.now(),
    });
    const rotated = events.find((e) => e.type === 'WebhookSecretRotated.v1' && e.data.secretId === secretId);
    if (rotated?.type !== 'WebhookSecretRotated.v1')
      throw new Error(`rotation of ${merchantId} appended no WebhookSecretRotated for ${secretId}`);
    return { row, secret, previousSecretExpiresAt: new Date(rotated.data.previousSecretExpiresAt) };
  }

  async declarePauser(
    merchantId: string,
    mode: Mode,
    input: { merchantPauser: string; signature: string; acknowledgeSharedPauserRisk: boolean },
  ): Promise<MerchantSettingsRow> {
    const message = pauserDeclarationMessage(merchantId, mode);
    let recoveredSigner: string | null;
    try {
      recoveredSigner = verifyMessage(message, input.signature);
    } catch {
      recoveredSigner = null;
    }
    // A contract account (multisig, smart wallet) proves control by approving the message on every chain of the
    // merchant's mode.
    const contractApproved =
      recoveredSigner?.toLowerCase() === input.merchantPauser.toLowerCase()
        ? false
        : await this.contractSignatures.approvesOnEveryChain(
            mode,
            input.merchantPauser,
            message,
            input.signature,
          );
    return this.run(merchantId, {
      type: 'DeclarePauser',
      merchantPauser: input.merchantPauser,
      recoveredSigner,
      contractApproved,
      operatorPauser: this.config.operatorPauser,
      acknowledgeSharedPauserRisk: input.acknowledgeSharedPauserRisk,
      now: this.clock.now(),
    });
  }

  /** PUT /payments/settlement: settlement address and/or fiat configuration (validated by the caller). */
  configureSettlement(
    merchantId: string,
    input: { settlementAddress?: string; fiat?: Partial<FiatSettlementDetails> | null },
  ): Promise<MerchantSettingsRow> {
    return this.run(merchantId, {
      type: 'ConfigureSettlement',
      ...(input.settlementAddress !== undefined
        ? {
            settlementAddress: parseAddress(input.settlementAddress, 'settlement_address', { nonZero: true }),
          }
        : {}),
      ...(input.fiat !== undefined ? { fiat: input.fiat } : {}),
      now: this.clock.now(),
    });
  }

  /** Operator: turns beta features on or off (validated by the decider: known names, booleans). */
  setBetaFeatures(merchantId: string, features: Record<string, unknown>): Promise<MerchantSettingsRow> {
    return this.run(merchantId, { type: 'SetBetaFeatures', features, now: this.clock.now() });
  }

  recordSubscriptionManagerDeployed(
    merchantId: string,
    chain: string,
    address: string,
  ): Promise<MerchantSettingsRow> {
    return this.run(merchantId, {
      type: 'RecordSubscriptionManagerDeployed',
      chain,
      address,
      now: this.clock.now(),
    });
  }

  private async storeSecret(merchantId: string, secretId: string, secret: string): Promise<void> {
    await this.dataSource.query(
      'INSERT INTO webhook_secrets (secret_id, merchant_id, sealed_secret, created_at) VALUES ($1, $2, $3, $4)',
      [secretId, merchantId, this.config.secretBox.seal(secret, secretId), this.clock.now()],
    );
  }
}
