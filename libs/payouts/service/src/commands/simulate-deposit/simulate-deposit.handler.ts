import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { createHash } from 'node:crypto';
import { CommandHandler } from '@stablepay/commands';
import { parseAddress } from '@stablepay/evm';
import {
  PAYOUTS_COMMANDS,
  type PayoutsCommandResult,
  type SimulateDepositCommand,
} from '@stablepay/payouts-api';
import { parsePayoutAmount } from '@stablepay/payouts-domain';
import { validationError } from '@stablepay/util';
import { DepositIntake } from '../../flow/deposit-intake';
import { payoutTokens } from '../../offering';
import { PAYOUTS_CONFIG, type PayoutsConfig } from '../../payouts.config';
import { PayoutsReader } from '../../read-model/payouts.reader';

/** The sandbox payer the test helper sends from unless told (anvil's dev account 1; screening: clear). */
export const SANDBOX_DEPOSIT_SENDER = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';

/**
 * Test helper (test mode): crypto arriving at a customer's deposit address, through the same intake as a deposit the
 * chain reports. Answers the payout it funded (`id` empty and revision -1: none was waiting).
 */
@Controller()
export class SimulateDepositHandler {
  constructor(
    @Inject(DepositIntake) private readonly intake: DepositIntake,
    @Inject(PayoutsReader) private readonly reader: PayoutsReader,
    @Inject(PAYOUTS_CONFIG) private readonly config: PayoutsConfig,
  ) {}

  @CommandHandler(PAYOUTS_COMMANDS.simulateDeposit)
  async handle(@Payload() command: SimulateDepositCommand): Promise<PayoutsCommandResult> {
    const customer = await this.reader.getOwned('customer', command.merchant, command.customerId);
    const { input } = command;
    const tokens = payoutTokens(this.config, command.merchant.mode);
    const chain = input.chain;
    if (typeof chain !== 'string' || !tokens.some((t) => t.chain === chain))
      throw validationError(
        'chain',
        `chain must be one of ${[...new Set(tokens.map((t) => t.chain))].join(', ')}.`,
      );
    const token = typeof input.token === 'string' ? input.token.toUpperCase() : '';
    if (!tokens.some((t) => t.chain === chain && t.symbol === token))
      throw validationError('token', `token must be a payout token on ${chain} such as USDC.`);
    const amount = parsePayoutAmount(input.amount);
    const from = parseAddress(input.from ?? SANDBOX_DEPOSIT_SENDER, 'from');
    const txHash = `0x${createHash('sha256').update(`${customer.id}\u0000${command.commandId}`).digest('hex')}`;
    const done = await this.intake.record(customer, {
      chain,
      token,
      amount,
      from,
      txHash,
      logIndex: 0,
      simulated: true,
    });
    return done ? { id: done.id, revision: done.revision } : { id: '', revision: -1 };
  }
}
