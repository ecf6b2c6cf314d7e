import { Controller, Inject, Logger } from '@nestjs/common';
import { Interface, ZeroAddress, getAddress } from 'ethers';
import { CLOCK } from '@stablepay/aggregate';
import { CHAIN_OPERATOR_CONFIG, type ChainOperatorConfig, OperatorRelayers } from '@stablepay/chain-operator';
import { CommandHandler } from '@stablepay/commands';
import { StablepayRegistryAbi, connectStablepayRegistry, toOnChainId } from '@stablepay/contracts';
import { MAX_SIGNATURE_HORIZON_SECONDS, stablepayDomain, verifyTypedDataSigner } from '@stablepay/evm';
import {
  MERCHANT_CHAIN_COMMANDS,
  type RevokeAuthorizationsCommand,
  type RevokeAuthorizationsResult,
} from '@stablepay/merchants-api';
import {
  type Clock,
  DomainError,
  cannotProcess,
  conflict,
  nestedParam,
  validationError,
} from '@stablepay/util';

const REGISTRY = new Interface(StablepayRegistryAbi);

const chainUnavailable = (message: string) =>
  new DomainError({ type: 'api_error', status: 503, code: 'chain_unavailable', message });

/** What the preflight found on one chain: relay it, or it is already done. */
type Planned =
  | {
      readonly kind: 'send';
      readonly chain: string;
      readonly epoch: bigint;
      readonly deadline: bigint;
      readonly signature: string;
    }
  | { readonly kind: 'done'; readonly chain: string; readonly epoch: bigint };

/**
 * Use case: relay merchant-signed revocations (POST /settings/revoke-authorizations). The registry's
 * `revokeAuthorizationsBySig` bumps the merchant's epoch on that chain when the signer the chain holds signed
 * RevokeAuthorizations(merchantId, epoch, deadline) at the current epoch; every merchant signature names its epoch,
 * so all of them made before stop working at once (charges, captures, refunds, rescues, a MerchantChange). The
 * operator pays the gas, so the merchant needs no funded key on every chain.
 *
 * Every chain is preflighted before anything is sent (the deadline window against the chain time, the EIP-712
 * digest at the chain's current epoch recovered against the signer it holds, the same definitions the contract
 * uses): one bad signature sends nothing anywhere. A signature naming the epoch just before the current one is
 * answered `already_revoked` and sends nothing (a retry after it landed). Chains are then relayed in order; a chain
 * that fails after others landed answers the error, and a retry answers the landed ones `already_revoked`.
 *
 * Hosted with the registration worker, where the operator key is (the payments process); the gateway sends it.
 */
@Controller()
export class RevokeAuthorizationsHandler {
  private readonly logger = new Logger('revoke-authorizations');

  constructor(
    @Inject(CHAIN_OPERATOR_CONFIG) private readonly config: ChainOperatorConfig,
    @Inject(OperatorRelayers) private readonly relayers: OperatorRelayers,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  @CommandHandler(MERCHANT_CHAIN_COMMANDS.revokeAuthorizations)
  async handle(command: RevokeAuthorizationsCommand): Promise<RevokeAuthorizationsResult> {
    const { merchantId, mode } = command.merchant;
    if (!this.config.enabled || !this.config.addresses || !this.relayers.set)
      throw chainUnavailable('No chain is configured (CHAIN_RPC_URLS): nothing can be revoked on chain.');
    if (mode !== this.config.mode)
      throw conflict(
        'chain_mode_mismatch',
        `This deployment's chains are ${this.config.mode} chains; a ${mode} merchant is not registered on them.`,
      );
    const plans: Planned[] = [];
    for (const [i, r] of command.revocations.entries()) {
      plans.push(await this.preflight(merchantId, r, nestedParam('revocations', i)));
    }
    const chains = plans.map((p) => p.chain);
    if (new Set(chains).size !== chains.length)
      throw validationError('revocations', 'revocations names one chain twice.', 'duplicate_chain');

    const answers: RevokeAuthorizationsResult['revocations'][number][] = [];
    for (const plan of plans) {
      if (plan.kind === 'done') {
        answers.push({
          chain: plan.chain,
          status: 'already_revoked',
          epoch: plan.epoch.toString(),
          tx_hash: null,
        });
        continue;
      }
      const txHash = await this.relay(merchantId, plan);
      answers.push({
        chain: plan.chain,
        status: 'revoked',
        epoch: (plan.epoch + 1n).toString(),
        tx_hash: txHash,
      });
    }
    return { object: 'authorization_revocation', revocations: answers };
  }

  private async preflight(
    merchantId: string,
    r: RevokeAuthorizationsCommand['revocations'][number],
    at: string,
  ): Promise<Planned> {
    const registry = this.config.addresses?.registry ?? '';
    let chain: string;
    try {
      chain = this.config.registry.get(r.chain, 'chain').caip2;
    } catch (error) {
      if (error instanceof DomainError)
        throw validationError(`${at}[chain]`, `${at}[chain]: ${error.message}`, error.code);
      throw error;
    }
    const relayer = this.relayers.require().for(chain);
    const onChainId = toOnChainId(merchantId);
    const reader = connectStablepayRegistry(registry, relayer.provider);
    const [auth, block] = await Promise.all([
      reader.merchantAuth(onChainId),
      relayer.provider.getBlock('latest'),
    ]);
    const held = getAddress(auth.signer);
    const epoch = BigInt(auth.epoch);
    if (held === ZeroAddress)
      throw conflict(
        'merchant_not_registered',
        `The merchant is not registered on ${chain}: it has no signer there, so no signature of it is honoured to revoke.`,
        `${at}[chain]`,
      );
    const deadline = BigInt(r.deadline);
    const recoveredAt = (e: bigint) => {
      try {
        return verifyTypedDataSigner(
          'RevokeAuthorizations',
          stablepayDomain(relayer.chainId, registry),
          { merchantId: onChainId, epoch: e, deadline },
          r.signature,
        );
      } catch {
        return null;
      }
    };
    if (recoveredAt(epoch) !== held) {
      // Signed at the epoch this revocation (or another) already ended: nothing left to revoke with it.
      if (epoch > 0n && recoveredAt(epoch - 1n) === held) return { kind: 'done', chain, epoch };
      throw cannotProcess(
        'invalid_signature',
        `The signature is not ${held}'s over RevokeAuthorizations (chain ${chain}, registry ${registry}, merchant ${onChainId}, epoch ${epoch}, the deadline sent): sign it with the signer ${chain} holds, at its current epoch.`,
        `${at}[signature]`,
      );
    }
    const chainTime = BigInt(block?.timestamp ?? Math.floor(this.clock.now().getTime() / 1000));
    if (deadline < chainTime)
      throw cannotProcess(
        'signature_expired',
        `The signature's deadline ${deadline} is before the chain time ${chainTime} on ${chain}: sign again.`,
        `${at}[deadline]`,
      );
    if (deadline > chainTime + MAX_SIGNATURE_HORIZON_SECONDS)
      throw cannotProcess(
        'signature_deadline_too_far',
        `The deadline may lie at most 7 days (${MAX_SIGNATURE_HORIZON_SECONDS} s) after the chain time ${chainTime}.`,
        `${at}[deadline]`,
      );
    return { kind: 'send', chain, epoch, deadline, signature: r.signature };
  }

  private async relay(merchantId: string, plan: Extract<Planned, { kind: 'send' }>): Promise<string> {
    const registry = this.config.addresses?.registry ?? '';
    const outcome = await this.relayers
      .require()
      .for(plan.chain)
      .submit({
        to: registry,
        abi: REGISTRY,
        data: REGISTRY.encodeFunctionData('revokeAuthorizationsBySig', [
          toOnChainId(merchantId),
          plan.deadline,
          plan.signature,
        ]),
      });
    if (outcome.kind === 'simulation_rejected')
      throw cannotProcess(
        'chain_rejected',
        `The registry on ${plan.chain} refused the revocation (${outcome.errorName}).`,
      );
    if (outcome.kind === 'reverted')
      throw new DomainError({
        type: 'api_error',
        status: 502,
        code: 'transaction_reverted',
        message: `The transaction ${outcome.txHash} reverted on ${plan.chain} (${outcome.revert?.errorName ?? 'no reason'}).`,
      });
    if (outcome.kind === 'receipt_timeout')
      throw chainUnavailable(
        `The revocation ${outcome.txHash} on ${plan.chain} was sent but not mined in time; retry to see it applied.`,
      );
    this.logger.log({
      msg: 'merchant authorizations revoked',
      merchantId,
      chain: plan.chain,
      txHash: outcome.txHash,
    });
    return outcome.txHash;
  }
}
