import { type CanActivate, type ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import {
  ambiguousCredentials,
  API_KEY_RESOLVER,
  type ApiKeyResolver,
  authenticateApiKey,
  parseApiKey,
  unauthenticated,
} from '@stablepay/http';

/**
 * SPEC Authentication 5: the alternate payment-request surface takes the secret API key in `x-api-key` (the same
 * keys as `Authorization: Bearer`, resolved the same way). Its routes are @Public() to the bearer guard and carry
 * this one instead, so each surface accepts exactly its own header.
 */
@Injectable()
export class XApiKeyGuard implements CanActivate {
  private resolver?: ApiKeyResolver;

  constructor(@Inject(ModuleRef) private readonly moduleRef: ModuleRef) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<FastifyRequest>();
    const ambiguous = ambiguousCredentials(request.raw);
    if (ambiguous) throw unauthenticated(ambiguous);
    const raw = request.headers['x-api-key'];
    if (raw === undefined)
      throw unauthenticated(
        request.headers['authorization'] !== undefined
          ? 'This surface (/payment-requests/...) takes the API key in the x-api-key header, not Authorization: send "x-api-key: sk_test_...".'
          : 'No API key provided. Send it as "x-api-key: sk_test_..." on this surface.',
      );
    const key = Array.isArray(raw) ? undefined : raw.trim();
    if (!key || !parseApiKey(key)) throw unauthenticated('Invalid API key provided.');
    // The merchants scope provides the resolver to the whole gateway; looked up once, across modules.
    this.resolver ??= this.moduleRef.get<ApiKeyResolver>(API_KEY_RESOLVER, { strict: false });
    return authenticateApiKey(context, key, this.resolver);
  }
}
