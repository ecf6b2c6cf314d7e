import { Body, Controller, Get, HttpCode, Inject, Patch, Post, Put } from '@nestjs/common';
import { type AuthenticatedMerchant, CurrentMerchant } from '@stablepay/http';
import { requireBrandingColor } from '@stablepay/merchants-domain';
import { invalidRequest, validationError } from '@stablepay/util';
import { parseAddress } from './address';
import { MERCHANTS_USE_CASES, type MerchantsUseCases } from './merchants.port';
import { RegisterSignerDto, UpdateProfileDto, UpdateSettlementDto } from './settings.dto';

@Controller('settings')
export class SettingsController {
  constructor(@Inject(MERCHANTS_USE_CASES) private readonly merchants: MerchantsUseCases) {}

  @Get()
  get(@CurrentMerchant() merchant: AuthenticatedMerchant) {
    return this.merchants.settings(merchant);
  }

  /** Registers the merchant signer (and optionally the settlement address). */
  @Post()
  @HttpCode(200)
  registerSigner(@CurrentMerchant() merchant: AuthenticatedMerchant, @Body() body: RegisterSignerDto) {
    return this.merchants.registerSigner(merchant, body.merchant_signer, body.settlement_address);
  }

  @Put()
  updateSettlement(@CurrentMerchant() merchant: AuthenticatedMerchant, @Body() body: UpdateSettlementDto) {
    return this.merchants.updateSettlementAddress(merchant, body.settlement_address);
  }

  @Patch()
  updateProfile(@CurrentMerchant() merchant: AuthenticatedMerchant, @Body() body: UpdateProfileDto) {
    // DTO instances define every declared field (as undefined), so "empty" means no defined value.
    if (Object.values(body).every((v) => v === undefined)) {
      throw invalidRequest(
        'Send at least one of display_name, webhook_url, background_color, primary_color, webhook_event_types.',
      );
    }
    // webhook_event_types are checked against the webhook catalogue, and webhook_url against the egress rules, by
    // the use case (both need the service's configuration).
    return this.merchants.updateProfile(merchant, {
      ...(body.display_name !== undefined ? { displayName: body.display_name } : {}),
      ...(body.webhook_url !== undefined ? { webhookUrl: body.webhook_url } : {}),
      ...(body.background_color !== undefined
        ? { backgroundColor: requireBrandingColor('background_color', body.background_color) }
        : {}),
      ...(body.primary_color !== undefined
        ? { primaryColor: requireBrandingColor('primary_color', body.primary_color) }
        : {}),
      ...(body.webhook_event_types !== undefined ? { webhookEventTypes: body.webhook_event_types } : {}),
    });
  }

  @Post('webhook/secret')
  @HttpCode(200)
  rotateSecret(@CurrentMerchant() merchant: AuthenticatedMerchant, @Body() body: unknown) {
    // It takes no parameters; a body that is anything but nothing or `{}` is a client mistake, refused before a
    // secret changes.
    requireNoParameters(body);
    return this.merchants.rotateWebhookSecret(merchant);
  }

  @Get('pauser')
  getPauser(@CurrentMerchant() merchant: AuthenticatedMerchant) {
    return this.merchants.pauser(merchant);
  }

  /** SPEC: a malformed merchant_pauser or signature is 400 invalid_request, before any business rule. */
  @Post('pauser')
  @HttpCode(200)
  declarePauser(@CurrentMerchant() merchant: AuthenticatedMerchant, @Body() body: unknown) {
    return this.merchants.declarePauser(merchant, parseDeclaration(body));
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
