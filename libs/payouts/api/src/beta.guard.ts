import { type CanActivate, type ExecutionContext, Inject, Injectable } from '@nestjs/common';
import type { AuthenticatedMerchant } from '@stablepay/http';
import { DomainError } from '@stablepay/util';
import { PAYOUTS_USE_CASES, type PayoutsUseCases } from './payouts.port';

/**
 * SPEC Payouts (beta): "The beta features must be enabled per account." Runs after the API-key guard (global guards
 * first), so an unauthenticated call is still 401; a merchant the operator has not enabled gets 403
 * `beta_feature_not_enabled` before its request is read any further.
 */
@Injectable()
export class PayoutsBetaGuard implements CanActivate {
  constructor(@Inject(PAYOUTS_USE_CASES) private readonly useCases: PayoutsUseCases) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const merchant = context.switchToHttp().getRequest<{ merchant?: AuthenticatedMerchant }>().merchant;
    if (merchant && (await this.useCases.betaEnabled(merchant))) return true;
    throw new DomainError({
      type: 'invalid_request',
      status: 403,
      code: 'beta_feature_not_enabled',
      message:
        'Payouts are in beta and not enabled for this account. Ask Stablepay to enable the payouts beta.',
    });
  }
}
