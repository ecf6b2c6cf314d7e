import {
  Body,
  type CanActivate,
  Controller,
  type ExecutionContext,
  HttpCode,
  Inject,
  Injectable,
  Post,
  UseGuards,
} from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { timingSafeEqual, createHash } from 'node:crypto';
import { Public, unauthenticated } from '@stablepay/http';
import { DomainError } from '@stablepay/util';
import { MerchantCommands } from './merchant-commands';
import { MERCHANTS_CONFIG, type MerchantsConfig } from './merchants.config';
import { CreateMerchantDto } from './settings.dto';

/** Operator API: absent (404) unless ADMIN_TOKEN is set; then `Authorization: Bearer <ADMIN_TOKEN>`. */
@Injectable()
export class AdminTokenGuard implements CanActivate {
  constructor(@Inject(MERCHANTS_CONFIG) private readonly config: MerchantsConfig) {}

  canActivate(context: ExecutionContext): boolean {
    const token = this.config.adminToken;
    if (!token) {
      throw new DomainError({
        type: 'invalid_request',
        status: 404,
        code: 'route_not_found',
        message: 'Unrecognized request URL.',
      });
    }
    const header = context.switchToHttp().getRequest<FastifyRequest>().headers['authorization'] ?? '';
    const given = /^Bearer\s+(\S+)$/i.exec(header)?.[1] ?? '';
    const digest = (s: string) => createHash('sha256').update(s).digest();
    if (!timingSafeEqual(digest(given), digest(token))) throw unauthenticated('Invalid admin token.');
    return true;
  }
}

@Public()
@UseGuards(AdminTokenGuard)
@Controller('admin')
export class AdminController {
  constructor(@Inject(MerchantCommands) private readonly commands: MerchantCommands) {}

  /** Creates a merchant; its secret API key is returned here once and never again. */
  @Post('merchants')
  @HttpCode(201)
  async createMerchant(@Body() body: CreateMerchantDto) {
    const { row, apiKey } = await this.commands.createMerchant({
      name: body.name,
      mode: body.mode,
      settlementMode: body.settlement_mode ?? 'crypto',
    });
    return {
      object: 'merchant' as const,
      id: row.merchant_id,
      name: row.name,
      mode: row.mode,
      settlement_mode: row.settlement_mode,
      api_key: apiKey,
      created_at: new Date(row.created_at).toISOString(),
    };
  }
}
