import { Inject, Injectable, Logger } from '@nestjs/common';
import type { ClientBase } from 'pg';
import { DataSource } from 'typeorm';
import { CLOCK, EVENT_STORE, handleCommand } from '@stablepay/aggregate';
import {
  computeSubscriptionManagerAddress,
  connectStablepayRegistry,
  SubscriptionManagerFactoryAbi,
  toOnChainId,
} from '@stablepay/contracts';
import type { EventStore } from '@stablepay/event-store';
import { merchantDecider, merchantStreamId } from '@stablepay/merchants-domain';
import {
  MerchantChainRegistrar,
  type MerchantSettingsRow,
  replacedSettlementAddressPaid,
} from '@stablepay/merchants-service';
import { type Clock, conflict, DomainError, notFound } from '@stablepay/util';
import { type ContractRunner, Interface, ZeroAddress } from 'ethers';
import type { RelayOutcome } from '@stablepay/relayer';
import { SUBSCRIPTIONS_CONFIG, type SubscriptionsConfig } from '../subscriptions.config';
import { chainUnavailable, fromChain, type Mode, OperatorRelayers } from './chain-access';

export interface ManagerRow {
  readonly merchant_id: string;
  readonly chain: string;
  readonly mode: Mode;
  readonly address: string;
  readonly merchant_pauser: string;
}

export interface MerchantAddress {
  readonly role: 'subscription manager contract' | 'merchant signer' | 'settlement address';
  readonly address: string;
}

const FACTORY = new Interface(SubscriptionManagerFactoryAbi);

const cannotProcess = (code: string, message: string) =>
  new DomainError({ type: 'cannot_process', status: 422, code, message });

/**
 * The merchants' SubscriptionManagers: one per merchant and chain, deployed by the operator when first needed
 * (`SubscriptionManagerFactory.deployManager(merchantId, merchantPauser)`, the declared pauser bound into the
 * address), then recorded three ways: here (`subscription_managers`: the chain observation consumer maps a manager's
 * logs to its merchant), on the merchant (`RecordSubscriptionManagerDeployed`: the pauser is locked from then on,
 * `pauser_locked_by_deployment`) and in the indexer's watch list (`indexer_watched_contracts`, a documented write
 * interface of the indexer), from the deployment block on.
 */
@Injectable()
export class SubscriptionManagers {
  private readonly logger = new Logger('subscription-managers');
  /** One deployment at a time per merchant and chain in this process (two subscribe calls racing). */
  private readonly inFlight = new Map<string, Promise<ManagerRow>>();

  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(SUBSCRIPTIONS_CONFIG) private readonly config: SubscriptionsConfig,
    @Inject(OperatorRelayers) private readonly relayers: OperatorRelayers,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async find(merchantId: string, chain: string): Promise<ManagerRow | undefined> {
    const rows: ManagerRow[] = await this.dataSource.query(
      'SELECT merchant_id, chain, mode, address, merchant_pauser FROM subscription_managers WHERE merchant_id = $1 AND chain = $2',
      [merchantId, chain],
    );
    return rows[0];
  }

  /** Every manager of the merchant (one per chain it was deployed on): read before the caller knows the chain. */
  async ofMerchant(merchantId: string): Promise<ManagerRow[]> {
    return this.dataSource.query(
      'SELECT merchant_id, chain, mode, address, merchant_pauser FROM subscription_managers WHERE merchant_id = $1',
      [merchantId],
    );
  }

  async findByAddress(chain: string, address: string): Promise<ManagerRow | undefined> {
    const rows: ManagerRow[] = await this.dataSource.query(
      'SELECT merchant_id, chain, mode, address, merchant_pauser FROM subscription_managers WHERE chain = $1 AND address = $2',
      [chain, address.toLowerCase()],
    );
    return rows[0];
  }

  /**
   * The merchant's own addresses on `chain`: its manager (deployed, or the address its deployment will have: the
   * pauser is bound into it) and its signer and settlement address. None of them can subscribe to the merchant.
   */
  async merchantAddresses(merchantId: string, chain: string): Promise<MerchantAddress[]> {
    const settings = await this.settings(merchantId);
    const { subscriptionManagerFactory: factory, registry } = this.config;
    const manager =
      (await this.find(merchantId, chain))?.address ??
      (settings.merchant_pauser && factory && registry
        ? computeSubscriptionManagerAddress(
            factory,
            registry,
            toOnChainId(merchantId),
            settings.merchant_pauser,
          )
        : null);
    const own: Array<[MerchantAddress['role'], string | null]> = [
      ['subscription manager contract', manager],
      ['merchant signer', settings.merchant_signer],
      ['settlement address', settings.settlement_address],
    ];
    return own.flatMap(([role, address]) => (address ? [{ role, address }] : []));
  }

  /**
   * The settlement address in force at `at` (a charge's block time) and since when, when a charge paying `paidTo`
   * then paid an address the merchant had replaced; null when it did not, or none is known for that time
   * (settlement-address-history.ts in the merchants scope).
   */
  async replacedSettlementAddressPaid(
    merchantId: string,
    at: string,
    paidTo: string,
  ): Promise<{ address: string; changedAt: string } | null> {
    // Not `settings()`: a chain fact is recorded whatever the settings hold, and a 404 would fail it for ever.
    const held = await replacedSettlementAddressPaid(this.dataSource, merchantId, at, paidTo);
    return held ? { address: held.address, changedAt: held.validFrom } : null;
  }

  /**
   * The refusal to answer while `chain`'s registry holds another signer or settlement address than the merchant's
   * settings (GET /settings `change_requires_merchant_signature`), or null. Until the merchant's MerchantChange
   * lands, the chain still pays every subscribe and charge to the settlement address the merchant replaced and
   * still accepts the signer it retired, so nothing that moves a subscriber's money is taken on it (as checkouts
   * are not: payments' `merchant_change_pending`). A chain without the merchant yet is not a change: the
   * deployment registers it.
   */
  async pendingMerchantChange(
    merchantId: string,
    mode: Mode,
    chain: string,
    /** Where the registry is read; default the relayer's provider (a charge passes its unbatched chain-time one). */
    provider: ContractRunner = this.relayers.for(mode, chain).provider,
  ): Promise<DomainError | null> {
    const registry = this.config.registry;
    if (!registry) return null;
    const [settings, { signer, settlement }] = await Promise.all([
      this.settings(merchantId),
      fromChain(chain, connectStablepayRegistry(registry, provider).merchant(toOnChainId(merchantId))),
    ]);
    if (!settings.merchant_signer || !settings.settlement_address || signer === ZeroAddress) return null;
    const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
    if (same(signer, settings.merchant_signer) && same(settlement, settings.settlement_address)) return null;
    return conflict(
      'merchant_change_pending',
      `The merchant's signer or settlement address changed in its settings but not on ${chain}, which still pays the previous settlement address and accepts the previous signer: sign a MerchantChange with the signer the chain holds and send it with POST /settings/merchant-change. GET /settings shows chain_registrations.`,
      'chain',
    );
  }

  /** The merchant's manager on `chain`, deployed now if it is not yet. */
  ensureDeployed(merchantId: string, mode: Mode, chain: string): Promise<ManagerRow> {
    const key = `${merchantId}|${chain}`;
    let running = this.inFlight.get(key);
    if (!running) {
      running = this.deploy(merchantId, mode, chain).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, running);
    }
    return running;
  }

  private async deploy(merchantId: string, mode: Mode, chain: string): Promise<ManagerRow> {
    const known = await this.find(merchantId, chain);
    if (known) return known;
    const settings = await this.settings(merchantId);
    if (!settings.merchant_signer || !settings.settlement_address)
      throw cannotProcess(
        'merchant_signer_required',
        'The merchant has no signer registered (POST /settings): a subscription could never be charged or cancelled.',
      );
    if (!settings.merchant_pauser)
      throw cannotProcess(
        'merchant_pauser_required',
        'The merchant has not declared a pause authority (POST /settings/pauser); it is bound into the subscription manager for good.',
      );
    const factory = this.config.subscriptionManagerFactory;
    const registry = this.config.registry;
    if (!factory || !registry)
      throw chainUnavailable(
        'The subscription manager factory or the registry address is not configured (SUBSCRIPTION_MANAGER_FACTORY_ADDRESS, REGISTRY_ADDRESS).',
      );
    const relayer = this.relayers.for(mode, chain);
    const onChainMerchant = toOnChainId(merchantId);
    await this.ensureRegistered(mode, chain, registry, onChainMerchant, settings);
    const pauser = settings.merchant_pauser;
    const address = computeSubscriptionManagerAddress(factory, registry, onChainMerchant, pauser);
    let txHash: string | null = null;
    let fromBlock: number;
    if ((await fromChain(chain, relayer.provider.getCode(address))) === '0x') {
      const outcome = await fromChain(
        chain,
        relayer.submit({
          to: factory,
          data: FACTORY.encodeFunctionData('deployManager', [onChainMerchant, pauser]),
          abi: FACTORY,
        }),
      );
      if (outcome.kind !== 'confirmed')
        throw chainUnavailable(
          `Deploying the subscription manager on ${chain} failed (${outcomeName(outcome)}).`,
        );
      txHash = outcome.txHash;
      fromBlock = outcome.blockNumber;
    } else {
      fromBlock = await fromChain(chain, relayer.provider.getBlockNumber());
    }
    const at = this.clock.now();
    await this.dataSource.query(
      `INSERT INTO subscription_managers (merchant_id, chain, mode, address, merchant_pauser, deploy_tx_hash, deployed_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
      [merchantId, chain, mode, address.toLowerCase(), pauser.toLowerCase(), txHash, at],
    );
    await this.dataSource.query(
      `INSERT INTO indexer_watched_contracts (chain, address, kind, scanned_through) VALUES ($1, $2, 'subscription_manager', $3)
       ON CONFLICT (chain, address) DO NOTHING`,
      [chain, address.toLowerCase(), fromBlock - 1],
    );
    // The merchant aggregate decides (handleCommand on its stream, as its own gateway does): from now on the pauser
    // is locked (pauser_locked_by_deployment).
    await handleCommand(
      this.store,
      merchantStreamId(merchantId),
      merchantDecider,
      { type: 'RecordSubscriptionManagerDeployed', chain, address, now: at },
      {
        idempotencyKey: `subscription-manager:${chain}`,
        metadata: { merchantId, mode, occurredAt: at.toISOString() },
      },
    );
    this.logger.log({ msg: 'subscription manager deployed', merchantId, chain, address, txHash });
    const row = await this.find(merchantId, chain);
    if (!row) throw new Error(`manager of ${merchantId} on ${chain} was not recorded`);
    return row;
  }

  /**
   * A merchant must be registered on the chain before its manager can take a subscribe (MerchantNotConfigured).
   * Registration on every chain follows POST /settings (the registration worker); this covers a chain it has not
   * reached yet, through the same registrar. A merchant registered with other values (a MerchantChange, an admin
   * change) is left as it is: the manager reads the registry.
   */
  private async ensureRegistered(
    mode: Mode,
    chain: string,
    registry: string,
    onChainMerchant: string,
    settings: MerchantSettingsRow,
  ): Promise<void> {
    if (!settings.merchant_signer || !settings.settlement_address) return;
    const registrar = new MerchantChainRegistrar({ for: (c) => this.relayers.for(mode, c) }, registry);
    const outcome = await registrar.register({
      chain,
      onChainId: onChainMerchant,
      signer: settings.merchant_signer,
      settlement: settings.settlement_address,
    });
    if (outcome.kind === 'retry') {
      // The cause stays in the log: RPC errors can carry the node's URL, and with it a provider key.
      this.logger.warn({
        msg: 'merchant registration before a manager deployment failed',
        onChainMerchant,
        chain,
        error: outcome.error,
      });
      throw chainUnavailable(`Registering the merchant on ${chain} failed; retry shortly.`);
    }
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

export function outcomeName(outcome: RelayOutcome): string {
  if (outcome.kind === 'simulation_rejected') return outcome.errorName;
  if (outcome.kind === 'reverted') return outcome.revert?.errorName ?? 'reverted';
  return outcome.kind;
}

/**
 * A local test chain that came back without the history the database recorded (the embedded run's recovery of its
 * own anvil chains, never a real chain): the managers deployed on it are gone, so their rows are forgotten and the
 * next subscribe there deploys the merchant's manager again (the same address: the pauser is locked). The
 * subscriptions recorded on that chain are not recovered (their on-chain state and allowances went with it): they
 * are counted by status for the caller's log. Runs in the caller's transaction, before the services start.
 */
export async function forgetManagersOnLostLocalChain(
  client: ClientBase,
  chain: string,
): Promise<{ managersForgotten: number; subscriptionsNotRecovered: Record<string, number> }> {
  const exists = await client.query<{ t: string | null }>(
    "SELECT to_regclass('subscription_managers')::text AS t",
  );
  if (!exists.rows[0]?.t) return { managersForgotten: 0, subscriptionsNotRecovered: {} };
  const forgotten = await client.query('DELETE FROM subscription_managers WHERE chain = $1', [chain]);
  const left = await client.query<{ status: string; n: string }>(
    'SELECT status, count(*)::text AS n FROM subscriptions WHERE chain = $1 GROUP BY status ORDER BY status',
    [chain],
  );
  return {
    managersForgotten: forgotten.rowCount ?? 0,
    subscriptionsNotRecovered: Object.fromEntries(left.rows.map((r) => [r.status, Number(r.n)])),
  };
}
