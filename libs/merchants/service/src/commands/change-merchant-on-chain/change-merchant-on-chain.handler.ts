import { Controller, Inject, Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { Interface, ZeroAddress, getAddress } from 'ethers';
import { CLOCK, EVENT_STORE, handleCommand, loadAggregate } from '@stablepay/aggregate';
import { CHAIN_OPERATOR_CONFIG, type ChainOperatorConfig, OperatorRelayers } from '@stablepay/chain-operator';
import { CommandHandler } from '@stablepay/commands';
import { StablepayRegistryAbi, connectStablepayRegistry, toOnChainId } from '@stablepay/contracts';
import type { EventStore } from '@stablepay/event-store';
import { MAX_SIGNATURE_HORIZON_SECONDS, stablepayDomain, verifyTypedDataSigner } from '@stablepay/evm';
import {
  type ChangeMerchantOnChainCommand,
  type ChangeMerchantOnChainResult,
  MERCHANT_CHAIN_COMMANDS,
} from '@stablepay/merchants-api';
import { merchantDecider, merchantStreamId } from '@stablepay/merchants-domain';
import { type Clock, DomainError, cannotProcess, conflict, notFound, validationError } from '@stablepay/util';
import { RegistrationStore } from '../../chain-registration/registration.store';
import type { MerchantSettingsRow } from '../../settings.reader';

const REGISTRY = new Interface(StablepayRegistryAbi);

/** Every signer the merchant's settings ever named, checksummed (the merchant stream's MerchantSignerRegistered). */
function signersRegistered(events: ReadonlyArray<{ type: string; data: unknown }>): ReadonlySet<string> {
  const signers = new Set<string>();
  for (const e of events)
    if (e.type === 'MerchantSignerRegistered.v1')
      signers.add(getAddress((e.data as { merchantSigner: string }).merchantSigner));
  return signers;
}

const chainUnavailable = (message: string) =>
  new DomainError({ type: 'api_error', status: 503, code: 'chain_unavailable', message });

/**
 * Use case: relay a merchant-signed MerchantChange (POST /settings/merchant-change). The registry changes a
 * registered merchant only with its current signer's signature (or the admin's 2-day delayed proposal), so the
 * operator cannot bring a new signer or settlement address on chain by itself; the merchant signs, we preflight
 * with the contract's own checks (deadline window, the EIP-712 MerchantChange digest at the current epoch,
 * recovered against the signer the chain holds), simulate, submit, and record the fact
 * (`MerchantChangedOnChain.v1` on the merchant stream, the registration row `registered` with the transaction).
 *
 * The change only ever brings the SETTINGS' signer and settlement address on chain (POST /settings first): the
 * chain and the settings cannot diverge through this route. A retry after the change landed finds the chain
 * holding them and answers `unchanged`, sending nothing (the epoch bump also makes a replayed signature invalid).
 *
 * Hosted with the registration worker, where the operator key is (the payments process); the gateway sends it.
 */
@Controller()
export class ChangeMerchantOnChainHandler {
  private readonly logger = new Logger('merchant-change');
  private readonly registrations: RegistrationStore;

  constructor(
    @Inject(CHAIN_OPERATOR_CONFIG) private readonly config: ChainOperatorConfig,
    @Inject(OperatorRelayers) private readonly relayers: OperatorRelayers,
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {
    this.registrations = new RegistrationStore(dataSource);
  }

  @CommandHandler(MERCHANT_CHAIN_COMMANDS.changeMerchant)
  async handle(command: ChangeMerchantOnChainCommand): Promise<ChangeMerchantOnChainResult> {
    const { merchantId, mode } = command.merchant;
    if (!this.config.enabled || !this.config.addresses || !this.relayers.set)
      throw chainUnavailable('No chain is configured (CHAIN_RPC_URLS): nothing can be changed on chain.');
    const chain = this.config.registry.get(command.chain, 'chain').caip2;
    const settings = await this.settings(merchantId);
    if (mode !== this.config.mode)
      throw conflict(
        'chain_mode_mismatch',
        `This deployment's chains are ${this.config.mode} chains; a ${mode} merchant is not registered on them.`,
      );
    if (!settings.merchant_signer || !settings.settlement_address)
      throw conflict(
        'merchant_signer_required',
        'Register a merchant signer and a settlement address first (POST /settings): the change brings them on chain.',
      );
    const signer = getAddress(settings.merchant_signer);
    const settlement = getAddress(settings.settlement_address);
    if (command.merchantSigner !== undefined && getAddress(command.merchantSigner) !== signer)
      throw validationError(
        'merchant_signer',
        `merchant_signer must be the settings' signer ${signer}: update the settings first (POST /settings).`,
        'settings_mismatch',
      );
    if (command.settlementAddress !== undefined && getAddress(command.settlementAddress) !== settlement)
      throw validationError(
        'settlement_address',
        `settlement_address must be the settings' ${settlement}: update the settings first (PUT /settings).`,
        'settings_mismatch',
      );

    const relayer = this.relayers.set.for(chain);
    const registryAddress = this.config.addresses.registry;
    const registry = connectStablepayRegistry(registryAddress, relayer.provider);
    const onChainId = toOnChainId(merchantId);
    const record = (txHash: string | null, now: Date) =>
      this.registrations.recordOnChain({ merchantId, chain, onChainId, signer, settlement, txHash, now });
    const [current, auth, block] = await Promise.all([
      registry.merchant(onChainId) as unknown as Promise<[string, string]>,
      registry.merchantAuth(onChainId),
      relayer.provider.getBlock('latest'),
    ]);
    const [heldSigner, heldSettlement] = current.map((a) => getAddress(a));
    if (heldSigner === ZeroAddress)
      throw conflict(
        'merchant_not_registered',
        `The merchant is not registered on ${chain} yet: the operator registers it with the settings' values (no signature needed).`,
      );
    const deadline = BigInt(command.deadline);
    const epoch = BigInt(auth.epoch);
    const domain = stablepayDomain(relayer.chainId, registryAddress);
    const recoveredAt = (at: bigint) =>
      verifyTypedDataSigner(
        'MerchantChange',
        domain,
        { merchantId: onChainId, signer, settlement, epoch: at, deadline },
        command.signature,
      );
    if (heldSigner === signer && heldSettlement === settlement) {
      // Already there (this change landed, or it never differed): nothing to send. The request is still answered
      // only for a signature of the merchant over this MerchantChange, as when something is sent: by the signer
      // held now at the current epoch, or, for a retry of the change that landed (its answer lost), at the epoch
      // before, by a signer the merchant registered. A signature nobody of the merchant's made is refused, not
      // answered 200 because there happened to be no work.
      const { revision, events } = await loadAggregate(
        this.store,
        merchantStreamId(merchantId),
        merchantDecider,
      );
      const retried = epoch > 0n && signersRegistered(events).has(recoveredAt(epoch - 1n));
      if (!retried && recoveredAt(epoch) !== heldSigner)
        throw cannotProcess(
          'invalid_signature',
          `The signature is not the merchant's over this MerchantChange (chain ${chain}, registry ${registryAddress}, signer ${signer}, settlement ${settlement}, epoch ${epoch}, the deadline sent). ${chain} already holds these values: nothing needs to be signed.`,
          'signature',
        );
      await record(null, this.clock.now());
      return { id: merchantId, revision, chain, outcome: 'unchanged', txHash: null };
    }

    const chainTime = BigInt(block?.timestamp ?? Math.floor(this.clock.now().getTime() / 1000));
    if (deadline < chainTime)
      throw cannotProcess(
        'signature_expired',
        `The signature's deadline ${deadline} is before the chain time ${chainTime}: sign again.`,
        'deadline',
      );
    if (deadline > chainTime + MAX_SIGNATURE_HORIZON_SECONDS)
      throw cannotProcess(
        'signature_deadline_too_far',
        `The deadline may lie at most 7 days (${MAX_SIGNATURE_HORIZON_SECONDS} s) after the chain time ${chainTime}.`,
        'deadline',
      );
    const recovered = recoveredAt(epoch);
    if (recovered !== heldSigner)
      throw cannotProcess(
        'invalid_signature',
        recovered === signer
          ? `The change must be signed by the signer ${chain} holds now (${heldSigner}), not by the new one: the current signer consents to its replacement.`
          : `The signature is not ${heldSigner}'s over this MerchantChange (chain ${chain}, registry ${registryAddress}, signer ${signer}, settlement ${settlement}, epoch ${epoch}, the deadline sent).`,
        'signature',
      );

    const outcome = await relayer.submit({
      to: registryAddress,
      abi: REGISTRY,
      data: REGISTRY.encodeFunctionData('changeMerchant', [
        onChainId,
        signer,
        settlement,
        deadline,
        command.signature,
      ]),
    });
    if (outcome.kind === 'simulation_rejected')
      throw cannotProcess('chain_rejected', `The registry refused the change (${outcome.errorName}).`);
    if (outcome.kind === 'reverted')
      throw new DomainError({
        type: 'api_error',
        status: 502,
        code: 'transaction_reverted',
        message: `The transaction ${outcome.txHash} reverted on chain (${outcome.revert?.errorName ?? 'no reason'}).`,
      });
    if (outcome.kind === 'receipt_timeout')
      // Broadcast, not mined in time: a retry of the same request answers `unchanged` once it lands.
      throw chainUnavailable(
        `The change ${outcome.txHash} was sent but not mined in time; retry to see it applied.`,
      );

    const at = this.clock.now();
    const { revision } = await handleCommand(
      this.store,
      merchantStreamId(merchantId),
      merchantDecider,
      { type: 'RecordMerchantChangeOnChain', chain, signer, settlement, txHash: outcome.txHash, now: at },
      {
        idempotencyKey: `merchant-change:${chain}:${outcome.txHash}`,
        metadata: { merchantId, mode, occurredAt: at.toISOString() },
      },
    );
    await record(outcome.txHash, at);
    this.logger.log({ msg: 'merchant change relayed', merchantId, chain, txHash: outcome.txHash });
    return { id: merchantId, revision, chain, outcome: 'changed', txHash: outcome.txHash };
  }

  private async settings(merchantId: string): Promise<MerchantSettingsRow> {
    const rows: MerchantSettingsRow[] = await this.dataSource.query(
      'SELECT * FROM merchant_settings WHERE merchant_id = $1',
      [merchantId],
    );
    if (!rows[0]) throw notFound('merchant', merchantId);
    return rows[0];
  }
}
