import { Body, Controller, Get, HttpCode, Inject, Patch, Post, Put } from '@nestjs/common';
import { type AuthenticatedMerchant, CurrentMerchant } from '@stablepay/http';
import { pauserDeclarationMessage, requireBrandingColor } from '@stablepay/merchants-domain';
import { invalidRequest, validationError } from '@stablepay/util';
import { MerchantCommands, parseAddress } from './merchant-commands';
import { MERCHANTS_CONFIG, type MerchantsConfig } from './merchants.config';
import { presentSettings } from './settings.presenter';
import { RegisterSignerDto, UpdateProfileDto, UpdateSettlementDto } from './settings.dto';
import { SettingsReader } from './settings.reader';
import { requireKnownEventTypes } from './webhook-event-types';

@Controller('settings')
export class SettingsController {
  constructor(
    @Inject(MerchantCommands) private readonly commands: MerchantCommands,
    @Inject(SettingsReader) private readonly reader: SettingsReader,
    @Inject(MERCHANTS_CONFIG) private readonly config: MerchantsConfig,
  ) {}

  @Get()
  async get(@CurrentMerchant() merchant: AuthenticatedMerchant) {
    return presentSettings(await this.reader.get(merchant.merchantId), this.config);
  }

  /** Registers the merchant signer (and optionally the settlement address). */
  @Post()
  @HttpCode(200)
  async registerSigner(@CurrentMerchant() merchant: AuthenticatedMerchant, @Body() body: RegisterSignerDto) {
    const row = await this.commands.registerSigner(
      merchant.merchantId,
      body.merchant_signer,
      body.settlement_address,
    );
    return presentSettings(row, this.config);
  }

  @Put()
  async updateSettlement(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Body() body: UpdateSettlementDto,
  ) {
    return presentSettings(
      await this.commands.updateSettlementAddress(merchant.merchantId, body.settlement_address),
      this.config,
    );
  }

  @Patch()
  async updateProfile(@CurrentMerchant() merchant: AuthenticatedMerchant, @Body() body: UpdateProfileDto) {
    // DTO instances define every declared field (as undefined), so "empty" means no defined value.
    if (Object.values(body).every((v) => v === undefined)) {
      throw invalidRequest(
        'Send at least one of display_name, webhook_url, background_color, primary_color, webhook_event_types.',
      );
    }
    const { row, issuedSecret } = await this.commands.updateProfile(merchant.merchantId, {
      ...(body.display_name !== undefined ? { displayName: body.display_name } : {}),
      ...(body.webhook_url !== undefined ? { webhookUrl: body.webhook_url } : {}),
      ...(body.background_color !== undefined
        ? { backgroundColor: requireBrandingColor('background_color', body.background_color) }
        : {}),
      ...(body.primary_color !== undefined
        ? { primaryColor: requireBrandingColor('primary_color', body.primary_color) }
        : {}),
      ...(body.webhook_event_types !== undefined
        ? {
            webhookEventTypes: requireKnownEventTypes(
              body.webhook_event_types,
              this.config.webhookEventCatalogue,
            ),
          }
        : {}),
    });
    // The secret is shown once, in the response of the update that issued it.
    return {
      ...presentSettings(row, this.config),
      ...(issuedSecret ? { webhook_secret: issuedSecret } : {}),
    };
  }

  @Post('webhook/secret')
  @HttpCode(200)
  async rotateSecret(@CurrentMerchant() merchant: AuthenticatedMerchant, @Body() body: unknown) {
    // It takes no parameters; a body that is anything but nothing or `{}` is a client mistake, refused before a
    // secret changes.
    requireNoParameters(body);
    const { row, secret } = await this.commands.rotateWebhookSecret(merchant.merchantId);
    return {
      object: 'webhook_secret' as const,
      webhook_secret: secret,
      previous_secret_expires_at: row.previous_secret_expires_at
        ? new Date(row.previous_secret_expires_at).toISOString()
        : null,
    };
  }

  @Get('pauser')
  async getPauser(@CurrentMerchant() merchant: AuthenticatedMerchant) {
    const row = await this.reader.get(merchant.merchantId);
    return {
      object: 'pauser_declaration' as const,
      declaration_message: pauserDeclarationMessage(merchant.merchantId, merchant.mode),
      merchant_pauser: row.merchant_pauser,
      shared_pauser_risk_acknowledged: row.shared_pauser_risk_acknowledged,
      locked: row.subscription_manager_address !== null,
    };
  }

  /** SPEC: a malformed merchant_pauser or signature is 400 invalid_request, before any business rule. */
  @Post('pauser')
  @HttpCode(200)
  async declarePauser(@CurrentMerchant() merchant: AuthenticatedMerchant, @Body() body: unknown) {
    const input = parseDeclaration(body);
    const row = await this.commands.declarePauser(merchant.merchantId, merchant.mode, input);
    return {
      object: 'pauser_declaration' as const,
      declaration_message: pauserDeclarationMessage(merchant.merchantId, merchant.mode),
      merchant_pauser: row.merchant_pauser,
      shared_pauser_risk_acknowledged: row.shared_pauser_risk_acknowledged,
      locked: row.subscription_manager_address !== null,
    };
  }
}

function parseDeclaration(body: unknown): {
  merchantPauser: string;
  signature: string;
  acknowledgeSharedPauserRisk: boolean;
} {
  const invalid = (param: string, message: string) => invalidRequest(message, undefined, param);
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw invalidRequest('The request body must be a JSON object.');
  const b = body as Record<string, unknown>;
  for (const key of Object.keys(b)) {
    if (!['merchant_pauser', 'signature', 'acknowledge_shared_pauser_risk'].includes(key)) {
      throw invalid(key, `Received unknown parameter: ${key}`);
    }
  }
  if (typeof b['merchant_pauser'] !== 'string')
    throw invalid('merchant_pauser', 'merchant_pauser is required: a 20-byte hex address.');
  const merchantPauser = parseAddress('merchant_pauser', b['merchant_pauser'], invalid);
  const signature = b['signature'];
  if (typeof signature !== 'string' || !/^0x[0-9a-fA-F]{130}$/.test(signature)) {
    throw invalid(
      'signature',
      'signature is required: a 65-byte hex EIP-191 signature (0x followed by 130 hex digits) over declaration_message.',
    );
  }
  const ack = b['acknowledge_shared_pauser_risk'];
  if (ack !== undefined && typeof ack !== 'boolean')
    throw invalid('acknowledge_shared_pauser_risk', 'acknowledge_shared_pauser_risk must be a boolean.');
  return { merchantPauser, signature, acknowledgeSharedPauserRisk: ack === true };
}

function requireNoParameters(body: unknown): void {
  if (body === undefined || body === null) return;
  if (typeof body !== 'object' || Array.isArray(body))
    throw invalidRequest('This request takes no parameters: send no body or {}.');
  const [unknown] = Object.keys(body);
  if (unknown !== undefined) throw validationError(unknown, `Received unknown parameter: ${unknown}`);
}
