import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import type { DepositRescanAnswer, DepositRescanCommand } from '@stablepay/chain-operator';
import { CommandHandler } from '@stablepay/commands';
import { CUSTOMER_DEPOSIT_COMMANDS } from '@stablepay/payouts-api';
import { PayoutChainDeposits } from '../../flow/chain-deposits';

/** The operator's re-scan of a customer's deposit addresses (PayoutChainDeposits.rescan). */
@Controller()
export class RescanCustomerDepositsHandler {
  constructor(@Inject(PayoutChainDeposits) private readonly deposits: PayoutChainDeposits) {}

  @CommandHandler(CUSTOMER_DEPOSIT_COMMANDS.rescan)
  handle(@Payload() command: DepositRescanCommand): Promise<DepositRescanAnswer[]> {
    return this.deposits.rescan(command);
  }
}
