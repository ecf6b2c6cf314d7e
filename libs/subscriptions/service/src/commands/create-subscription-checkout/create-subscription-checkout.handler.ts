import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { assertChainModeServed } from '@stablepay/chain-operator';
import { CommandHandler } from '@stablepay/commands';
import type { AuthenticatedMerchant } from '@stablepay/http';
import {
  type CreateSubscriptionCheckoutCommand,
  SUBSCRIPTION_CHECKOUT_COMMANDS,
  type SubscriptionCheckoutCommandResult,
} from '@stablepay/subscriptions-api';
import type { CreateSubscriptionCheckoutInput } from '@stablepay/subscriptions-domain';
import { SUBSCRIPTIONS_CONFIG, type SubscriptionsConfig } from '../../subscriptions.config';
import { MerchantProfiles } from '../../subscription-checkouts/merchant-profiles';
import { SubscriptionCheckoutCommands } from '../../subscription-checkouts/subscription-checkout.commands';
import { SubscriptionCheckoutPresenter } from '../../subscription-checkouts/subscription-checkout.presenter';

/** Use case: create a subscription checkout intent (POST /subscription-checkouts), in the owning service. */
@Controller()
export class CreateSubscriptionCheckoutHandler {
  constructor(
    @Inject(SubscriptionCheckoutCommands) private readonly commands: SubscriptionCheckoutCommands,
    @Inject(MerchantProfiles) private readonly profiles: MerchantProfiles,
    @Inject(SubscriptionCheckoutPresenter) private readonly presenter: SubscriptionCheckoutPresenter,
    @Inject(SUBSCRIPTIONS_CONFIG) private readonly config: SubscriptionsConfig,
  ) {}

  @CommandHandler(SUBSCRIPTION_CHECKOUT_COMMANDS.create)
  async handle(
    @Payload() command: CreateSubscriptionCheckoutCommand,
  ): Promise<SubscriptionCheckoutCommandResult> {
    const { profile, ...details } = await this.details(
      command.merchant,
      command.input.price_currency,
      command.origin,
    );
    const { id, revision, changed } = await this.commands.create(
      { merchantId: command.merchant.merchantId, mode: command.merchant.mode },
      command.input,
      details,
      command.commandId,
    );
    return {
      id,
      revision,
      appended: changed,
      branding: { backgroundColor: profile.backgroundColor, primaryColor: profile.primaryColor },
    };
  }

  /**
   * Creates many intents of one currency for a merchant in one go (same rules as create; see
   * SubscriptionCheckoutCommands.createMany): imports, load and paging tests. Returns their ids in input order.
   */
  async createMany(
    merchant: AuthenticatedMerchant,
    inputs: readonly CreateSubscriptionCheckoutInput[],
    options: { origin: string; concurrency?: number },
  ): Promise<string[]> {
    const currencies = new Set(inputs.map((i) => i.price_currency?.toUpperCase()));
    if (currencies.size > 1) throw new RangeError('createMany takes inputs of one price_currency');
    const { profile: _profile, ...details } = await this.details(
      merchant,
      inputs[0]?.price_currency,
      options.origin,
    );
    return this.commands.createMany(
      { merchantId: merchant.merchantId, mode: merchant.mode },
      inputs,
      details,
      options.concurrency ?? 8,
    );
  }

  /** What deciding a create needs besides the input: the merchant, the quoted tokens and the offered chains. */
  private async details(merchant: AuthenticatedMerchant, currencyInput: unknown, origin: string) {
    // Nothing is recorded for a merchant of the other mode than the chains': its intent would offer tokens of
    // chains this deployment does not run.
    assertChainModeServed(this.config.chainMode, merchant.mode);
    const profile = await this.profiles.get(merchant.merchantId);
    const currency =
      typeof currencyInput === 'string' && /^[A-Za-z]{3}$/.test(currencyInput)
        ? currencyInput.toUpperCase()
        : null;
    const rates = await this.presenter.quote(currency);
    const chains = this.presenter.offeredChains(merchant.mode);
    // Only where subscribe could deploy the merchant's manager: a chain with an RPC URL, the factory, the key.
    const deploysManagers =
      this.config.subscriptionManagerFactory !== null &&
      this.config.registry !== null &&
      this.config.operatorPrivateKey !== null &&
      chains.some((c) => c.rpcUrl);
    const changePendingChains = deploysManagers
      ? await this.profiles.changePendingChains(merchant.merchantId)
      : [];
    return {
      profile,
      businessName: profile.businessName,
      hostedUrl: this.config.hostedUrl ?? `${origin}/hosted`,
      context: {
        availableChains: chains.map((c) => ({
          caip2: c.caip2,
          tokenSymbols: c.stablecoins.map((s) => s.symbol),
        })),
        quotedTokenSymbols: rates.map((r) => r.tokenSymbol),
        settlement: profile.settlement,
        ...(deploysManagers
          ? {
              merchantOnChain: {
                signer: profile.hasSigner,
                pauser: profile.hasPauser,
                changePendingChains,
              },
            }
          : {}),
      },
    };
  }
}
