import {
  type CanActivate,
  createParamDecorator,
  type ExecutionContext,
  Inject,
  Injectable,
  SetMetadata,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { DomainError, notFound } from '@stablepay/util';
import type { Mode } from '@stablepay/event-store';
import { ambiguousCredentials, parseApiKey, presentedKeyHash, sameDigest } from './api-key';
import { admitKeyLookup } from './rate-limits';

export interface AuthenticatedMerchant {
  readonly merchantId: string;
  readonly mode: Mode;
}

/** Looks an API key hash up; provided by the merchants scope (its api_keys read model). */
export interface ApiKeyResolver {
  resolve(keyHash: string): Promise<(AuthenticatedMerchant & { readonly keyHash: string }) | null>;
}
export const API_KEY_RESOLVER = Symbol('API_KEY_RESOLVER');

const PUBLIC = 'stablepay:public';
/** Marks a route that needs no API key (health, hosted pages, admin with its own guard). */
export const Public = (): MethodDecorator & ClassDecorator => SetMetadata(PUBLIC, true);

export const unauthenticated = (message: string): DomainError =>
  new DomainError({ type: 'authentication_error', status: 401, code: 'invalid_api_key', message });

type RequestWithMerchant = FastifyRequest & { merchant?: AuthenticatedMerchant };

/**
 * Looks a presented, well-formed key up and puts its merchant on the request; both API-key guards end here. The
 * key's hash is the one the rate limits already took (`presentedKeyHash`), and the lookup is admitted by them first
 * (`admitKeyLookup`: a locked-out source gets 429 without a lookup) and told how it ended.
 */
export async function authenticateApiKey(
  context: ExecutionContext,
  key: string,
  resolver: ApiKeyResolver,
): Promise<true> {
  const http = context.switchToHttp();
  const request = http.getRequest<RequestWithMerchant>();
  const hash = presentedKeyHash(request, key);
  const settle = await admitKeyLookup(request, http.getResponse<FastifyReply>(), hash);
  let found: Awaited<ReturnType<ApiKeyResolver['resolve']>> = null;
  try {
    found = await resolver.resolve(hash);
    // The lookup is by hash; the constant-time comparison guards against a resolver that matches loosely.
    if (found && !sameDigest(found.keyHash, hash)) found = null;
  } finally {
    settle(found !== null);
  }
  if (!found) throw unauthenticated('Invalid API key provided.');
  request.merchant = { merchantId: found.merchantId, mode: found.mode };
  return true;
}

/** Bearer secret-key authentication for every route not marked @Public(). */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(
    @Inject(Reflector) private readonly reflector: Reflector,
    @Inject(API_KEY_RESOLVER) private readonly resolver: ApiKeyResolver,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (context.getType() !== 'http') return true;
    const isPublic = this.reflector.getAllAndOverride<boolean>(PUBLIC, [
      context.getHandler(),
      context.getClass(),
    ]);
    if (isPublic) return true;
    const request = context.switchToHttp().getRequest<RequestWithMerchant>();
    const ambiguous = ambiguousCredentials(request.raw);
    if (ambiguous) throw unauthenticated(ambiguous);
    const header = request.headers['authorization'];
    // The payment-request surface's header is the one a newcomer most often tries here: say so, not "no key".
    if (!header && request.headers['x-api-key'] !== undefined)
      throw unauthenticated(
        'The x-api-key header is taken only by the payment-request surface (/payment-requests/...). Send the key on this route as "Authorization: Bearer sk_test_...".',
      );
    if (!header)
      throw unauthenticated('No API key provided. Send it as "Authorization: Bearer sk_test_...".');
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    if (!match?.[1])
      throw unauthenticated('Malformed Authorization header. Use "Authorization: Bearer <API key>".');
    const key = match[1];
    if (!parseApiKey(key)) throw unauthenticated('Invalid API key provided.');
    return authenticateApiKey(context, key, this.resolver);
  }
}

/** The merchant the API key belongs to; every read and write is scoped to it. */
export const CurrentMerchant = createParamDecorator(
  (_data: unknown, context: ExecutionContext): AuthenticatedMerchant => {
    const request = context.switchToHttp().getRequest<RequestWithMerchant>();
    if (!request.merchant) throw unauthenticated('No API key provided.');
    return request.merchant;
  },
);

/** `:merchantId` paths must name the caller's own merchant; anything else is a 404 that leaks nothing. */
export function assertOwnMerchant(caller: AuthenticatedMerchant, merchantIdParam: string): void {
  if (caller.merchantId !== merchantIdParam) throw notFound('merchant', merchantIdParam);
}
