import { Controller, Inject, Optional } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import {
  CHAIN_OPERATOR_CONFIG,
  assertChainModeServed,
  servedChainMode,
  type SupportedChains,
} from '@stablepay/chain-operator';
import { CommandHandler } from '@stablepay/commands';
import {
  type CheckoutCommandResult,
  type ConfigurePaymentCommand,
  PAYMENT_REQUEST_COMMANDS,
} from '@stablepay/payments-api';
import { PaymentCommands } from '../../payments/payment.commands';
import { PaymentReader } from '../../payments/payment.reader';

/**
 * Use case: the token and chain the payer will send are chosen before paying (POST
 * /payment-requests/payments/configure/:paymentId); from then on only that asset funds the payment.
 */
@Controller()
export class ConfigurePaymentHandler {
  constructor(
    @Inject(PaymentCommands) private readonly commands: PaymentCommands,
    @Inject(PaymentReader) private readonly reader: PaymentReader,
    @Optional()
    @Inject(CHAIN_OPERATOR_CONFIG)
    private readonly chains?: Pick<SupportedChains, 'enabled' | 'mode'>,
  ) {}

  @CommandHandler(PAYMENT_REQUEST_COMMANDS.configure)
  async handle(@Payload() command: ConfigurePaymentCommand): Promise<CheckoutCommandResult> {
    // Ownership first: another merchant's id is as unknown as a made-up one.
    const payment = await this.reader.getOwnedPayment(command.merchant, command.id);
    // Choosing the chain and token the payer sends sets a payment of the other mode than this deployment's chains
    // (recorded before checkouts were refused to such merchants) on its way to a deposit on the wrong chains.
    if (this.chains) assertChainModeServed(servedChainMode(this.chains), payment.mode);
    const done = await this.commands.run(
      payment,
      { type: 'SelectAsset', chain: command.chain, token: command.token },
      command.commandId,
    );
    return { checkoutId: payment.checkout_id, paymentId: payment.id, revision: done.revision };
  }
}
