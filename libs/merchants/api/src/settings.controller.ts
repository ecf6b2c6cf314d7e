import { Body, Controller, Get, HttpCode, Inject, Patch, Post, Put, Req } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import {
  AnswersSecret,
  type AuthenticatedMerchant,
  CurrentMerchant,
  idempotencyKeyOf,
  requireNoParameters,
} from '@stablepay/http';
import { parseAddress } from '@stablepay/evm';
import { requireBrandingColor } from '@stablepay/merchants-domain';
import {
  bodyNotAnObject,
  fieldFault,
  invalidRequest,
  nestedParam,
  takesFields,
  tooLargeFault,
  unknownParameter,
  validationError,
} from '@stablepay/util';
import type { RevocationInput } from './merchant.commands';
import { MERCHANTS_USE_CASES, type MerchantChangeInput, type MerchantsUseCases } from './merchants.port';
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
        'parameter_missing',
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
  @AnswersSecret()
  rotateSecret(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
  ) {
    // It takes no parameters; a body that is anything but nothing or `{}` is a client mistake, refused before a
    // secret changes.
    requireNoParameters(body);
    return this.merchants.rotateWebhookSecret(merchant, idempotencyKeyOf(request));
  }

  /**
   * Brings the chain's signer and settlement address to the settings' values with a MerchantChange signed by the
   * signer the chain holds (the registry lets nobody else change a registered merchant). Shapes are 400 with
   * `param`; the signature is checked against the chain before anything is sent.
   */
  @Post('merchant-change')
  @HttpCode(200)
  changeMerchant(@CurrentMerchant() merchant: AuthenticatedMerchant, @Body() body: unknown) {
    return this.merchants.changeMerchantOnChain(merchant, parseMerchantChange(body));
  }

  /**
   * Revokes every outstanding merchant signature (charges, captures, refunds, ...) on the chains named, with a
   * RevokeAuthorizations signed per chain by the signer that chain holds; the operator relays it (no gas from the
   * merchant). Shapes are 400 with `param`; every signature is checked against its chain before anything is sent.
   */
  @Post('revoke-authorizations')
  @HttpCode(200)
  revokeAuthorizations(@CurrentMerchant() merchant: AuthenticatedMerchant, @Body() body: unknown) {
    return this.merchants.revokeAuthorizations(merchant, parseRevocations(body));
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

const DECLARATION_KEYS = ['merchant_pauser', 'signature', 'acknowledge_shared_pauser_risk'];

export function parseDeclaration(body: unknown): {
  merchantPauser: string;
  signature: string;
  acknowledgeSharedPauserRisk: boolean;
} {
  // SPEC keeps these 400s `invalid_request`; like every other 400 they carry a code (c4a01b7).
  const invalid = (param: string, message: string, code = 'parameter_invalid') =>
    invalidRequest(message, code, param);
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw bodyNotAnObject();
  const b = body as Record<string, unknown>;
  for (const key of Object.keys(b)) {
    if (!DECLARATION_KEYS.includes(key)) throw unknownParameter(key, takesFields(DECLARATION_KEYS));
  }
  // The zero address has no key to pause with and can sign no declaration: refused here, not by the 422 rules.
  const merchantPauser = parseAddress(b['merchant_pauser'], 'merchant_pauser', { nonZero: true, invalid });
  const signature = b['signature'];
  if (typeof signature !== 'string' || !/^0x[0-9a-fA-F]{130}$/.test(signature)) {
    throw invalid(
      'signature',
      fieldFault(
        'signature',
        signature,
        'a 65-byte hex EIP-191 signature (0x followed by 130 hex digits) over declaration_message',
      ),
      signature === undefined ? 'parameter_missing' : 'parameter_invalid',
    );
  }
  const ack = b['acknowledge_shared_pauser_risk'];
  if (ack !== undefined && typeof ack !== 'boolean')
    throw invalid('acknowledge_shared_pauser_risk', 'acknowledge_shared_pauser_risk must be a boolean.');
  return { merchantPauser, signature, acknowledgeSharedPauserRisk: ack === true };
}

const DEADLINE =
  'the Unix time in seconds the signature was made to expire at (the one signed), a positive integer or digit string';

/** `{ revocations: [{ chain, deadline, signature }, ...] }`: one per chain, at least one, no chain twice. */
export function parseRevocations(body: unknown): RevocationInput[] {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw bodyNotAnObject();
  const b = body as Record<string, unknown>;
  for (const key of Object.keys(b)) {
    if (key !== 'revocations') throw unknownParameter(key, takesFields(['revocations']));
  }
  const list = b['revocations'];
  if (!Array.isArray(list) || list.length === 0 || list.length > 16)
    throw validationError(
      'revocations',
      fieldFault(
        'revocations',
        list,
        'an array of 1 to 16 objects { chain, deadline, signature }, one RevokeAuthorizations signature per chain',
      ),
    );
  const seen = new Set<string>();
  return list.map((item: unknown, i) => {
    const at = nestedParam('revocations', i);
    if (typeof item !== 'object' || item === null || Array.isArray(item))
      throw validationError(at, `${at} must be an object { chain, deadline, signature }.`);
    const r = item as Record<string, unknown>;
    for (const key of Object.keys(r)) {
      if (!['chain', 'deadline', 'signature'].includes(key))
        throw unknownParameter(nestedParam(at, key), `${at} takes chain, deadline, signature`);
    }
    const chain = r['chain'];
    if (typeof chain !== 'string' || chain === '')
      throw validationError(
        `${at}[chain]`,
        fieldFault(`${at}[chain]`, chain, 'the CAIP-2 id of the chain (eip155:<id>)'),
      );
    if (seen.has(chain.toLowerCase()))
      throw validationError(`${at}[chain]`, `${at}[chain]: ${chain} is named twice.`, 'duplicate_chain');
    seen.add(chain.toLowerCase());
    const deadline = parseDeadline(r['deadline']);
    if (deadline === null)
      throw validationError(
        `${at}[deadline]`,
        deadlineFault(`${at}[deadline]`, r['deadline']),
        'invalid_deadline',
      );
    const signature = r['signature'];
    if (typeof signature !== 'string' || !/^0x[0-9a-fA-F]{130}$/.test(signature))
      throw validationError(
        `${at}[signature]`,
        fieldFault(
          `${at}[signature]`,
          signature,
          'the 65-byte EIP-712 RevokeAuthorizations signature (0x followed by 130 hex digits)',
        ),
        'invalid_signature',
      );
    return { chain, deadline, signature };
  });
}

// 20 digits: the most parseDeadline takes (as a string; a number, the most JSON carries exactly).
const MAX_DEADLINE = 10n ** 20n - 1n;

function deadlineFault(param: string, value: unknown): string {
  const max = typeof value === 'number' ? BigInt(Number.MAX_SAFE_INTEGER) : MAX_DEADLINE;
  return tooLargeFault(param, value, max) ?? fieldFault(param, value, DEADLINE);
}

function parseDeadline(deadline: unknown): string | null {
  return typeof deadline === 'number' && Number.isSafeInteger(deadline) && deadline > 0
    ? String(deadline)
    : typeof deadline === 'string' && /^[1-9][0-9]{0,19}$/.test(deadline)
      ? deadline
      : null;
}

const MERCHANT_CHANGE_KEYS = ['chain', 'deadline', 'signature', 'merchant_signer', 'settlement_address'];

export function parseMerchantChange(body: unknown): MerchantChangeInput {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw bodyNotAnObject();
  const b = body as Record<string, unknown>;
  for (const key of Object.keys(b)) {
    if (!MERCHANT_CHANGE_KEYS.includes(key)) throw unknownParameter(key, takesFields(MERCHANT_CHANGE_KEYS));
  }
  const chain = b['chain'];
  if (typeof chain !== 'string' || chain === '')
    throw validationError(
      'chain',
      fieldFault('chain', chain, 'the CAIP-2 id of the chain to change (eip155:<id>)'),
    );
  const deadlineText = parseDeadline(b['deadline']);
  if (deadlineText === null)
    throw validationError('deadline', deadlineFault('deadline', b['deadline']), 'invalid_deadline');
  const signature = b['signature'];
  if (typeof signature !== 'string' || !/^0x[0-9a-fA-F]{130}$/.test(signature))
    throw validationError(
      'signature',
      fieldFault(
        'signature',
        signature,
        'the 65-byte EIP-712 MerchantChange signature (0x followed by 130 hex digits)',
      ),
      'invalid_signature',
    );
  const optionalAddress = (param: string): string | undefined => {
    const value = b[param];
    return value === undefined ? undefined : parseAddress(value, param, { nonZero: true });
  };
  const merchantSigner = optionalAddress('merchant_signer');
  const settlementAddress = optionalAddress('settlement_address');
  return {
    chain,
    deadline: deadlineText,
    signature,
    ...(merchantSigner !== undefined ? { merchantSigner } : {}),
    ...(settlementAddress !== undefined ? { settlementAddress } : {}),
  };
}
