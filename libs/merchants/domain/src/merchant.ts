import {
  cannotProcess,
  conflict,
  DomainError,
  invalidRequest,
  notFound,
  takesFields,
  unknownParameter,
  validationError,
} from '@stablepay/util';
import {
  BETA_FEATURES,
  type BetaFeature,
  type FiatSettlementDetails,
  type MerchantEvent,
  type Mode,
  type SettlementMode,
} from './merchant.events';
import { requireAddress, requireName, requireProfileFields, WEBHOOK_SECRET_GRACE_MS } from './rules';

export interface MerchantState {
  readonly exists: boolean;
  readonly merchantId: string;
  readonly name: string;
  readonly mode: Mode;
  readonly settlementMode: SettlementMode;
  /** The hash of the merchant's one API key (MerchantCreated, replaced by MerchantApiKeyReissued). */
  readonly apiKeyHash: string;
  /** When that key was issued (its MerchantCreated's createdAt or MerchantApiKeyReissued's reissuedAt). */
  readonly apiKeyIssuedAt: string;
  readonly displayName: string;
  readonly settlementAddress: string | null;
  readonly merchantSigner: string | null;
  readonly webhookUrl: string | null;
  readonly webhookSecretId: string | null;
  readonly previousWebhookSecretId: string | null;
  readonly previousSecretExpiresAt: string | null;
  readonly backgroundColor: string | null;
  readonly primaryColor: string | null;
  readonly merchantPauser: string | null;
  readonly subscriptionManagerDeployed: boolean;
  readonly fiatSettlement: FiatSettlementDetails | null;
  readonly betaFeatures: Partial<Record<BetaFeature, boolean>>;
}

export const initialMerchantState = (): MerchantState => ({
  exists: false,
  merchantId: '',
  name: '',
  mode: 'test',
  settlementMode: 'crypto',
  apiKeyHash: '',
  apiKeyIssuedAt: '',
  displayName: '',
  settlementAddress: null,
  merchantSigner: null,
  webhookUrl: null,
  webhookSecretId: null,
  previousWebhookSecretId: null,
  previousSecretExpiresAt: null,
  backgroundColor: null,
  primaryColor: null,
  merchantPauser: null,
  subscriptionManagerDeployed: false,
  fiatSettlement: null,
  betaFeatures: {},
});

export function evolveMerchant(state: MerchantState, event: MerchantEvent): MerchantState {
  switch (event.type) {
    case 'MerchantCreated.v1':
      return {
        ...state,
        exists: true,
        merchantId: event.data.merchantId,
        name: event.data.name,
        displayName: event.data.name,
        mode: event.data.mode,
        settlementMode: event.data.settlementMode,
        apiKeyHash: event.data.apiKeyHash,
        apiKeyIssuedAt: event.data.createdAt,
      };
    case 'MerchantApiKeyReissued.v1':
      return { ...state, apiKeyHash: event.data.apiKeyHash, apiKeyIssuedAt: event.data.reissuedAt };
    case 'MerchantSignerRegistered.v1':
      return { ...state, merchantSigner: event.data.merchantSigner };
    case 'SettlementAddressChanged.v1':
      return { ...state, settlementAddress: event.data.settlementAddress };
    case 'MerchantProfileUpdated.v1': {
      const d = event.data;
      return {
        ...state,
        ...(d.displayName !== undefined ? { displayName: d.displayName } : {}),
        ...(d.webhookUrl !== undefined ? { webhookUrl: d.webhookUrl } : {}),
        ...(d.backgroundColor !== undefined ? { backgroundColor: d.backgroundColor } : {}),
        ...(d.primaryColor !== undefined ? { primaryColor: d.primaryColor } : {}),
      };
    }
    case 'WebhookSecretIssued.v1':
      return { ...state, webhookSecretId: event.data.secretId };
    case 'WebhookSecretRotated.v1':
      return {
        ...state,
        webhookSecretId: event.data.secretId,
        previousWebhookSecretId: event.data.previousSecretId,
        previousSecretExpiresAt: event.data.previousSecretExpiresAt,
      };
    case 'PauserDeclared.v1':
      return { ...state, merchantPauser: event.data.merchantPauser };
    case 'SubscriptionManagerDeployed.v1':
      return { ...state, subscriptionManagerDeployed: true };
    case 'MerchantChangedOnChain.v1':
      return state;
    case 'FiatSettlementConfigured.v1':
      return { ...state, fiatSettlement: event.data.fiat };
    case 'MerchantBetaFeaturesSet.v1':
      return { ...state, betaFeatures: { ...state.betaFeatures, ...event.data.features } };
  }
}

export type MerchantCommand =
  | {
      type: 'CreateMerchant';
      merchantId: string;
      name: string;
      mode: Mode;
      settlementMode: SettlementMode;
      apiKeyHash: string;
      apiKeyHint: string;
      now: Date;
    }
  | {
      /**
       * A keyed create retried after its first attempt created the merchant and lost the answer (so its key reached
       * nobody): the retry's key replaces it. The same key again is a no-op.
       */
      type: 'ReissueApiKey';
      apiKeyHash: string;
      apiKeyHint: string;
      /** When this attempt of the create began (before it found the merchant existing). */
      attemptStartedAt: Date;
      now: Date;
    }
  | { type: 'RegisterSigner'; merchantSigner: string; settlementAddress?: string; now: Date }
  | { type: 'UpdateSettlementAddress'; settlementAddress: string; now: Date }
  | {
      type: 'UpdateProfile';
      displayName?: string;
      webhookUrl?: string | null;
      backgroundColor?: string | null;
      primaryColor?: string | null;
      webhookEventTypes?: string[] | null;
      /** A freshly generated secret, used only if this update sets the first webhook URL. */
      candidateSecret: { secretId: string; fingerprint: string };
      now: Date;
    }
  | { type: 'RotateWebhookSecret'; secret: { secretId: string; fingerprint: string }; now: Date }
  | {
      type: 'DeclarePauser';
      merchantPauser: string;
      /** Address recovered from the EIP-191 signature over the declaration message (null when it does not recover). */
      recoveredSigner: string | null;
      /** ERC-1271 approval by a contract account on every supported chain (false until the chain layer checks it). */
      contractApproved: boolean;
      operatorPauser: string | null;
      acknowledgeSharedPauserRisk: boolean;
      now: Date;
    }
  | { type: 'RecordSubscriptionManagerDeployed'; chain: string; address: string; now: Date }
  | {
      /** A relayed MerchantChange landed: the chain holds the merchant's settings' signer and settlement now. */
      type: 'RecordMerchantChangeOnChain';
      chain: string;
      signer: string;
      settlement: string;
      txHash: string;
      now: Date;
    }
  | {
      /** PUT /payments/settlement: the settlement address and the fiat configuration, in one append. */
      type: 'ConfigureSettlement';
      settlementAddress?: string;
      /** Fiat fields to set (null unsets one; absent keeps it); `null` removes the whole configuration. */
      fiat?: Partial<FiatSettlementDetails> | null;
      now: Date;
    }
  | {
      /** POST /admin/merchants/:merchantId/beta-features (operator): features as received, checked here. */
      type: 'SetBetaFeatures';
      features: Record<string, unknown>;
      now: Date;
    };

const NO_FIAT_SETTLEMENT: FiatSettlementDetails = {
  currency: null,
  beneficiaryName: null,
  bankName: null,
  accountNumber: null,
  bankCode: null,
  country: null,
};

const sameAddress = (a: string | null, b: string | null): boolean =>
  !!a && !!b && a.toLowerCase() === b.toLowerCase();

function requireExists(state: MerchantState): void {
  if (!state.exists) throw notFound('merchant');
}

export function decideMerchant(command: MerchantCommand, state: MerchantState): MerchantEvent[] {
  const at = command.now.toISOString();
  switch (command.type) {
    case 'CreateMerchant':
      if (state.exists) throw conflict('merchant_exists', `Merchant ${command.merchantId} already exists.`);
      requireName('name', command.name);
      return [
        {
          type: 'MerchantCreated.v1',
          data: {
            merchantId: command.merchantId,
            name: command.name,
            mode: command.mode,
            settlementMode: command.settlementMode,
            apiKeyHash: command.apiKeyHash,
            apiKeyHint: command.apiKeyHint,
            createdAt: at,
          },
        },
      ];
    case 'ReissueApiKey':
      requireExists(state);
      if (command.apiKeyHash === state.apiKeyHash) return [];
      // An attempt that began before the key it would replace was issued is a stale one (it outlived its
      // Idempotency-Key claim, and a later attempt created the merchant or reissued its key and answered that key):
      // replacing that key would lock out the merchant that received it.
      if (command.attemptStartedAt.getTime() < Date.parse(state.apiKeyIssuedAt))
        throw conflict(
          'merchant_exists',
          `Merchant ${state.merchantId}'s API key was issued by a later attempt with this Idempotency-Key; this attempt changed nothing.`,
        );
      return [
        {
          type: 'MerchantApiKeyReissued.v1',
          data: {
            apiKeyHash: command.apiKeyHash,
            apiKeyHint: command.apiKeyHint,
            replacedApiKeyHash: state.apiKeyHash,
            reissuedAt: at,
          },
        },
      ];
    case 'RegisterSigner': {
      requireExists(state);
      requireAddress('merchant_signer', command.merchantSigner);
      if (command.settlementAddress !== undefined)
        requireAddress('settlement_address', command.settlementAddress);
      const events: MerchantEvent[] = [];
      if (state.merchantSigner !== command.merchantSigner) {
        events.push({
          type: 'MerchantSignerRegistered.v1',
          data: { merchantSigner: command.merchantSigner, registeredAt: at },
        });
      }
      if (command.settlementAddress !== undefined && command.settlementAddress !== state.settlementAddress) {
        events.push({
          type: 'SettlementAddressChanged.v1',
          data: { settlementAddress: command.settlementAddress, changedAt: at },
        });
      }
      return events;
    }
    case 'UpdateSettlementAddress':
      requireExists(state);
      requireAddress('settlement_address', command.settlementAddress);
      if (command.settlementAddress === state.settlementAddress) return [];
      return [
        {
          type: 'SettlementAddressChanged.v1',
          data: { settlementAddress: command.settlementAddress, changedAt: at },
        },
      ];
    case 'UpdateProfile': {
      requireExists(state);
      requireProfileFields(command);
      const changes: Omit<
        Extract<MerchantEvent, { type: 'MerchantProfileUpdated.v1' }>['data'],
        'updatedAt'
      > = {
        ...(command.displayName !== undefined && command.displayName !== state.displayName
          ? { displayName: command.displayName }
          : {}),
        ...(command.webhookUrl !== undefined && command.webhookUrl !== state.webhookUrl
          ? { webhookUrl: command.webhookUrl }
          : {}),
        ...(command.backgroundColor !== undefined && command.backgroundColor !== state.backgroundColor
          ? { backgroundColor: command.backgroundColor }
          : {}),
        ...(command.primaryColor !== undefined && command.primaryColor !== state.primaryColor
          ? { primaryColor: command.primaryColor }
          : {}),
        ...(command.webhookEventTypes !== undefined ? { webhookEventTypes: command.webhookEventTypes } : {}),
      };
      const events: MerchantEvent[] = [];
      if (Object.keys(changes).length > 0)
        events.push({ type: 'MerchantProfileUpdated.v1', data: { ...changes, updatedAt: at } });
      // SPEC: the secret is issued when the first webhook URL is configured and unchanged when the URL changes.
      if (typeof changes.webhookUrl === 'string' && state.webhookSecretId === null) {
        events.push({ type: 'WebhookSecretIssued.v1', data: { ...command.candidateSecret, issuedAt: at } });
      }
      return events;
    }
    case 'RotateWebhookSecret':
      requireExists(state);
      if (state.webhookSecretId === null) {
        throw invalidRequest(
          'No webhook secret exists yet: set a webhook_url with PATCH /settings first.',
          'webhook_not_configured',
        );
      }
      // One previous slot: the secret being replaced becomes the previous one for 24 hours, and whatever was
      // previous before is dropped at once.
      return [
        {
          type: 'WebhookSecretRotated.v1',
          data: {
            ...command.secret,
            previousSecretId: state.webhookSecretId,
            previousSecretExpiresAt: new Date(command.now.getTime() + WEBHOOK_SECRET_GRACE_MS).toISOString(),
            rotatedAt: at,
          },
        },
      ];
    case 'DeclarePauser': {
      requireExists(state);
      // SPEC Settings > pause declaration rejection rules, in this order (format was checked at the edge).
      if (state.merchantSigner === null) {
        throw new DomainError({
          type: 'invalid_request',
          status: 400,
          code: 'evm_payment_config_missing',
          message: 'Register an EVM merchant signer with POST /settings before declaring a pauser.',
        });
      }
      if (state.subscriptionManagerDeployed) {
        throw cannotProcess(
          'pauser_locked_by_deployment',
          'The subscription manager is already deployed; its pauser is fixed.',
          'merchant_pauser',
        );
      }
      if (sameAddress(command.merchantPauser, command.operatorPauser)) {
        throw cannotProcess(
          'pauser_is_exodus_pauser',
          "The merchant pauser must differ from the operator's own pauser.",
          'merchant_pauser',
        );
      }
      if (!sameAddress(command.recoveredSigner, command.merchantPauser) && !command.contractApproved) {
        throw cannotProcess(
          'pauser_control_unproven',
          'The signature does not recover to merchant_pauser, and the address is not a contract approving the declaration message on every supported chain.',
          'signature',
        );
      }
      if (sameAddress(command.merchantPauser, state.merchantSigner) && !command.acknowledgeSharedPauserRisk) {
        throw cannotProcess(
          'shared_pauser_risk_unacknowledged',
          'merchant_pauser equals the merchant signer: set acknowledge_shared_pauser_risk to true to accept one key for both roles.',
          'acknowledge_shared_pauser_risk',
        );
      }
      return [
        {
          type: 'PauserDeclared.v1',
          data: {
            merchantPauser: command.merchantPauser,
            sharedPauserRiskAcknowledged: command.acknowledgeSharedPauserRisk,
            declaredAt: at,
          },
        },
      ];
    }
    case 'RecordSubscriptionManagerDeployed':
      requireExists(state);
      return [
        {
          type: 'SubscriptionManagerDeployed.v1',
          data: { chain: command.chain, address: command.address, deployedAt: at },
        },
      ];
    case 'RecordMerchantChangeOnChain':
      // A fact of the chain: recorded whatever the settings say by now (the route only relays the settings' values).
      requireExists(state);
      return [
        {
          type: 'MerchantChangedOnChain.v1',
          data: {
            chain: command.chain,
            signer: command.signer,
            settlement: command.settlement,
            txHash: command.txHash,
            changedAt: at,
          },
        },
      ];
    case 'ConfigureSettlement': {
      requireExists(state);
      if (command.settlementAddress !== undefined)
        requireAddress('settlement_address', command.settlementAddress);
      const events: MerchantEvent[] = [];
      if (command.settlementAddress !== undefined && command.settlementAddress !== state.settlementAddress) {
        events.push({
          type: 'SettlementAddressChanged.v1',
          data: { settlementAddress: command.settlementAddress, changedAt: at },
        });
      }
      if (command.fiat === undefined) return events;
      let next: FiatSettlementDetails | null = null;
      if (command.fiat !== null) {
        const merged: { -readonly [K in keyof FiatSettlementDetails]: FiatSettlementDetails[K] } = {
          ...(state.fiatSettlement ?? NO_FIAT_SETTLEMENT),
        };
        for (const key of Object.keys(NO_FIAT_SETTLEMENT) as Array<keyof FiatSettlementDetails>) {
          const value = command.fiat[key];
          if (value !== undefined) merged[key] = value;
        }
        next = Object.values(merged).every((v) => v === null) ? null : merged;
      }
      if (JSON.stringify(next) !== JSON.stringify(state.fiatSettlement)) {
        events.push({ type: 'FiatSettlementConfigured.v1', data: { fiat: next, configuredAt: at } });
      }
      return events;
    }
    case 'SetBetaFeatures': {
      requireExists(state);
      const changed: Partial<Record<BetaFeature, boolean>> = {};
      for (const [key, value] of Object.entries(command.features)) {
        if (!(BETA_FEATURES as readonly string[]).includes(key))
          throw unknownParameter(key, takesFields(BETA_FEATURES));
        if (typeof value !== 'boolean') throw validationError(key, `${key} must be true or false.`);
        if ((state.betaFeatures[key as BetaFeature] ?? false) !== value) changed[key as BetaFeature] = value;
      }
      if (Object.keys(changed).length === 0) return [];
      return [{ type: 'MerchantBetaFeaturesSet.v1', data: { features: changed, setAt: at } }];
    }
  }
}

export const merchantDecider = {
  initialState: initialMerchantState,
  evolve: evolveMerchant,
  decide: decideMerchant,
};
