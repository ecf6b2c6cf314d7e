import { Controller, Inject, Optional } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import {
  CHAIN_OPERATOR_CONFIG,
  assertChainModeServed,
  servedChainMode,
  type ChainOperatorConfig,
} from '@stablepay/chain-operator';
import { CommandHandler } from '@stablepay/commands';
import {
  CHECKOUT_COMMANDS,
  type CheckoutCommandResult,
  type CreateCheckoutCommand,
} from '@stablepay/payments-api';
import { DomainError } from '@stablepay/util';
import { PAYMENTS_CONFIG, type PaymentsConfig } from '../../payments.config';
import { PaymentMerchantProfiles } from '../../payments/merchant-profiles';
import { checkoutIds, depositAddressOf, PaymentCommands } from '../../payments/payment.commands';
import { supportedStablecoins } from '../../payments/stablecoins';

/** Use case: create a checkout and its payment (POST /checkouts), in the owning payments service. */
@Controller()
export class CreateCheckoutHandler {
  constructor(
    @Inject(PaymentCommands) private readonly commands: PaymentCommands,
    @Inject(PaymentMerchantProfiles) private readonly profiles: PaymentMerchantProfiles,
    @Inject(PAYMENTS_CONFIG) private readonly config: PaymentsConfig,
    // Absent or disabled: no chain is acted on, no deposit is deployed, so nothing about the merchant to check.
    @Optional() @Inject(CHAIN_OPERATOR_CONFIG) private readonly chains?: ChainOperatorConfig,
  ) {}

  @CommandHandler(CHECKOUT_COMMANDS.create)
  async handle(@Payload() command: CreateCheckoutCommand): Promise<CheckoutCommandResult> {
    const factory = this.config.paymentFactoryAddress;
    if (!factory) {
      throw new DomainError({
        type: 'api_error',
        status: 503,
        code: 'payment_factory_not_configured',
        message: 'One-time payments are not available: this deployment has no PAYMENT_FACTORY_ADDRESS.',
      });
    }
    const { merchantId, mode } = command.merchant;
    // Before anything is read or written: the deposit address and the accepted assets would be on chains that are
    // not the merchant's mode (POST /checkouts and POST /payment-requests/payments/new both land here).
    if (this.chains) assertChainModeServed(servedChainMode(this.chains), mode);
    const profile = await this.profiles.get(merchantId);
    // The chains this deployment deploys this merchant's deposits on (its mode's); read from the registration
    // projection (GET /settings chain_registrations), never from the chain, on this hot path.
    const depositChains =
      this.chains?.enabled && this.chains.mode === mode ? this.chains.chains.map((c) => c.caip2) : [];
    const chainRegistrations = await this.profiles.chainStatuses(profile, merchantId, depositChains);
    const now = this.commands.now();
    const ids = checkoutIds({ merchantId, mode }, command.input, command.commandId, now);
    const hostedUrl = this.config.hostedUrl ?? `${command.origin}/hosted`;
    const done = await this.commands.create(
      { merchantId, mode },
      ids,
      {
        input: command.input,
        depositAddress: depositAddressOf(factory, merchantId, ids.onChainId),
        checkoutUrl: `${hostedUrl}/pay/${ids.checkoutId}`,
        context: {
          stablecoins: supportedStablecoins(this.config, mode),
          settlementMode: profile.settlementMode,
          fiatSettlementComplete: profile.fiatSettlementComplete,
          chainRegistrations,
        },
        now,
      },
      command.commandId,
    );
    return { checkoutId: ids.checkoutId, paymentId: ids.paymentId, revision: done.revision };
  }
}
