import { Body, Controller, HttpCode, Inject, Param, Post, UseGuards } from '@nestjs/common';
import type { DepositRescanAnswer, DepositRescanCommand } from '@stablepay/chain-operator';
import { CommandClient } from '@stablepay/commands';
import { Public } from '@stablepay/http';
import { AdminTokenGuard } from '@stablepay/merchants-api';
import { checkPaymentId, PAYMENT_DEPOSIT_COMMANDS } from '@stablepay/payments-api';
import { CUSTOMER_DEPOSIT_COMMANDS } from '@stablepay/payouts-api';
import { CUSTOMER_ID } from '@stablepay/payouts-domain';
import { bodyNotAnObject, notFound, takesFields, unknownParameter, validationError } from '@stablepay/util';

const MERCHANT_ID = /^mer_[0-9a-z]{1,64}$/;
const CAIP2 = /^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}$/;
const BLOCK = /^(0|[1-9][0-9]{0,15})$/;

/**
 * Operator API: re-scan a payment's or a payout customer's deposit address on chain (docs/chain-operator.md,
 * "Re-scanning a deposit address"). Here rather than in a scope's api lib because it is the operator's, behind the
 * merchants scope's AdminTokenGuard, and reaches two owners. The merchant is in the path: an object of another
 * merchant is 404, as on every merchant route. The owner finds the address, its chains and its creation; the indexer
 * scans again; what it finds goes through the usual observation consumers, which take each transfer once. A
 * payment's owner also reads the deposit's outflows in the range and answers them (`outflows`).
 */
@Public()
@UseGuards(AdminTokenGuard)
@Controller('admin/merchants/:merchantId')
export class DepositRescansController {
  constructor(@Inject(CommandClient) private readonly commands: CommandClient) {}

  @Post('payments/:id/deposit-rescans')
  @HttpCode(200)
  async payment(@Param('merchantId') merchantId: string, @Param('id') id: string, @Body() body: unknown) {
    const command = rescanCommand(merchantId, checkPaymentId(id), body, 'payment');
    const answer = await this.commands.send<DepositRescanAnswer[]>(
      'payments',
      PAYMENT_DEPOSIT_COMMANDS.rescan,
      command,
    );
    return rescanJson('payment_id', command, answer);
  }

  @Post('customers/:id/deposit-rescans')
  @HttpCode(200)
  async customer(@Param('merchantId') merchantId: string, @Param('id') id: string, @Body() body: unknown) {
    if (!CUSTOMER_ID.test(id)) throw notFound('customer', id);
    const command = rescanCommand(merchantId, id, body, 'customer');
    const answer = await this.commands.send<DepositRescanAnswer[]>(
      'payouts',
      CUSTOMER_DEPOSIT_COMMANDS.rescan,
      command,
    );
    return rescanJson('customer_id', command, answer);
  }
}

function rescanCommand(merchantId: string, id: string, body: unknown, what: string): DepositRescanCommand {
  // An unknown merchant cannot own the object: the same 404 as another merchant's.
  if (!MERCHANT_ID.test(merchantId)) throw notFound(what, id);
  const fields = body ?? {};
  if (typeof fields !== 'object' || Array.isArray(fields)) throw bodyNotAnObject();
  const { chain, from_block: fromBlock, ...rest } = fields as Record<string, unknown>;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) throw unknownParameter(unknown, takesFields(['chain', 'from_block']));
  if (chain !== undefined && (typeof chain !== 'string' || !CAIP2.test(chain)))
    throw validationError('chain', 'chain must be a CAIP-2 chain id such as eip155:8453.');
  // A JSON number or a decimal string: block numbers are integers, never money, but a string keeps big ones exact.
  const block =
    fromBlock === undefined
      ? undefined
      : typeof fromBlock === 'number' && Number.isSafeInteger(fromBlock) && fromBlock >= 0
        ? fromBlock
        : typeof fromBlock === 'string' && BLOCK.test(fromBlock) && Number.isSafeInteger(Number(fromBlock))
          ? Number(fromBlock)
          : null;
  if (block === null)
    throw validationError('from_block', 'from_block must be a block number (a non-negative integer).');
  return {
    merchantId,
    id,
    ...(chain !== undefined ? { chain } : {}),
    ...(block !== undefined ? { fromBlock: block } : {}),
  };
}

function rescanJson(
  idField: 'payment_id' | 'customer_id',
  command: DepositRescanCommand,
  answer: readonly DepositRescanAnswer[],
) {
  return {
    object: 'deposit_rescan' as const,
    merchant_id: command.merchantId,
    [idField]: command.id,
    rescans: answer.flatMap((a) =>
      a.rescans.map((r) => ({
        address: a.address,
        chain: r.chain,
        from_block: r.fromBlock,
        was_watched: r.wasWatched,
        // A payment's deposit: what left it in the range, and what the re-scan did with it. Not scanned for a
        // payout customer (its sweeps and refunds are recorded from the operator's own transactions): null.
        outflows:
          r.outflows?.map((o) => ({
            tx_hash: o.txHash,
            log_index: o.logIndex,
            block_number: o.blockNumber,
            block_hash: o.blockHash,
            kind: o.kind,
            token: o.token,
            to: o.to,
            amount: o.amount,
            status: o.status,
          })) ?? null,
      })),
    ),
  };
}
