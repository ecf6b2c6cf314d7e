import { DomainError } from '@stablepay/util';
import { decideMerchant, evolveMerchant, initialMerchantState, type MerchantCommand } from './merchant';
import type { MerchantEvent } from './merchant.events';
import {
  isFiatSettlementComplete,
  missingFiatSettlementFields,
  pauserDeclarationMessage,
  requireBrandingColor,
} from './rules';

const now = new Date('2026-05-01T12:00:00.000Z');
const created: MerchantEvent = {
  type: 'MerchantCreated.v1',
  data: {
    merchantId: 'mer_1',
    name: 'Acme',
    mode: 'test',
    settlementMode: 'crypto',
    apiKeyHash: 'h',
    apiKeyHint: 'sk_test_...abcd',
    createdAt: now.toISOString(),
  },
};
const SIGNER = '0x1111111111111111111111111111111111111111';
const PAUSER = '0x2222222222222222222222222222222222222222';
const OPERATOR = '0x3333333333333333333333333333333333333333';

/** given events, when command, then events (or error). */
function given(...events: MerchantEvent[]) {
  const state = events.reduce(evolveMerchant, initialMerchantState());
  return {
    when: (command: MerchantCommand) => {
      const run = () => decideMerchant(command, state);
      return {
        then: (expected: MerchantEvent[]) => expect(run()).toEqual(expected),
        thenError: (shape: Partial<DomainError>) => {
          let thrown: unknown;
          try {
            run();
          } catch (e) {
            thrown = e;
          }
          expect(thrown).toBeInstanceOf(DomainError);
          expect(thrown).toMatchObject(shape);
        },
      };
    },
  };
}

const declare = (
  over: Partial<Extract<MerchantCommand, { type: 'DeclarePauser' }>> = {},
): MerchantCommand => ({
  type: 'DeclarePauser',
  merchantPauser: PAUSER,
  recoveredSigner: PAUSER,
  contractApproved: false,
  operatorPauser: OPERATOR,
  acknowledgeSharedPauserRisk: false,
  now,
  ...over,
});
const signerRegistered: MerchantEvent = {
  type: 'MerchantSignerRegistered.v1',
  data: { merchantSigner: SIGNER, registeredAt: now.toISOString() },
};
const secret = { secretId: 'whs_1', fingerprint: 'fp1' };

describe('merchant aggregate', () => {
  it('is created once', () => {
    given(created)
      .when({
        type: 'CreateMerchant',
        merchantId: 'mer_1',
        name: 'Acme',
        mode: 'test',
        settlementMode: 'crypto',
        apiKeyHash: 'h',
        apiKeyHint: 'x',
        now,
      })
      .thenError({ status: 409, code: 'merchant_exists' });
  });

  it('commands on a missing merchant are 404', () => {
    given()
      .when({ type: 'UpdateSettlementAddress', settlementAddress: SIGNER, now })
      .thenError({ status: 404 });
  });

  it('registers the signer and the settlement address together', () => {
    given(created)
      .when({ type: 'RegisterSigner', merchantSigner: SIGNER, settlementAddress: PAUSER, now })
      .then([
        {
          type: 'MerchantSignerRegistered.v1',
          data: { merchantSigner: SIGNER, registeredAt: now.toISOString() },
        },
        {
          type: 'SettlementAddressChanged.v1',
          data: { settlementAddress: PAUSER, changedAt: now.toISOString() },
        },
      ]);
  });

  it('records nothing when an update changes nothing', () => {
    given(created, signerRegistered).when({ type: 'RegisterSigner', merchantSigner: SIGNER, now }).then([]);
  });

  describe('API key reissued for a keyed create retried after a lost answer', () => {
    const reissue = (apiKeyHash: string, attemptStartedAt = now, at = now): MerchantCommand => ({
      type: 'ReissueApiKey',
      apiKeyHash,
      apiKeyHint: 'sk_test_...wxyz',
      attemptStartedAt,
      now: at,
    });

    it('replaces the key its first attempt issued, naming the one replaced', () => {
      given(created)
        .when(reissue('h2'))
        .then([
          {
            type: 'MerchantApiKeyReissued.v1',
            data: {
              apiKeyHash: 'h2',
              apiKeyHint: 'sk_test_...wxyz',
              replacedApiKeyHash: 'h',
              reissuedAt: now.toISOString(),
            },
          },
        ]);
    });

    it('records nothing for the key the merchant already has (a create retried with the key it was given)', () => {
      given(created).when(reissue('h')).then([]);
    });

    it('a later reissue replaces the reissued key, not the first', () => {
      const first = decideMerchant(reissue('h2'), evolveMerchant(initialMerchantState(), created));
      given(created, ...first)
        .when(reissue('h3'))
        .then([expect.objectContaining({ data: expect.objectContaining({ replacedApiKeyHash: 'h2' }) })]);
    });

    it('is 404 for a merchant that does not exist', () => {
      given().when(reissue('h2')).thenError({ status: 404 });
    });

    it('refuses an attempt that began before the key it would replace was issued (a stale attempt after a later one answered that key)', () => {
      const later = new Date(now.getTime() + 60_000);
      const reissuedLater: MerchantEvent = {
        type: 'MerchantApiKeyReissued.v1',
        data: {
          apiKeyHash: 'h2',
          apiKeyHint: 'sk_test_...wxyz',
          replacedApiKeyHash: 'h',
          reissuedAt: later.toISOString(),
        },
      };
      // Began before the merchant was created (the retry that took its claim over created it and got the key).
      given(created)
        .when(reissue('h3', new Date(now.getTime() - 1), later))
        .thenError({ status: 409, code: 'merchant_exists' });
      // Began after the creation but before a later attempt's reissue.
      given(created, reissuedLater)
        .when(reissue('h3', new Date(later.getTime() - 1), later))
        .thenError({ status: 409, code: 'merchant_exists' });
    });
  });

  describe('webhook secret (SPEC: issued with the first URL, unchanged when the URL changes)', () => {
    it('issues the secret when the first webhook URL is set', () => {
      given(created)
        .when({ type: 'UpdateProfile', webhookUrl: 'https://a.example/h', candidateSecret: secret, now })
        .then([
          {
            type: 'MerchantProfileUpdated.v1',
            data: { webhookUrl: 'https://a.example/h', updatedAt: now.toISOString() },
          },
          { type: 'WebhookSecretIssued.v1', data: { ...secret, issuedAt: now.toISOString() } },
        ]);
    });

    it('keeps the secret when the URL changes', () => {
      given(
        created,
        {
          type: 'MerchantProfileUpdated.v1',
          data: { webhookUrl: 'https://a.example/h', updatedAt: now.toISOString() },
        },
        { type: 'WebhookSecretIssued.v1', data: { ...secret, issuedAt: now.toISOString() } },
      )
        .when({
          type: 'UpdateProfile',
          webhookUrl: 'https://b.example/h',
          candidateSecret: { secretId: 'whs_2', fingerprint: 'fp2' },
          now,
        })
        .then([
          {
            type: 'MerchantProfileUpdated.v1',
            data: { webhookUrl: 'https://b.example/h', updatedAt: now.toISOString() },
          },
        ]);
    });

    it('rotation keeps one previous secret for 24 hours', () => {
      given(created, { type: 'WebhookSecretIssued.v1', data: { ...secret, issuedAt: now.toISOString() } })
        .when({ type: 'RotateWebhookSecret', secret: { secretId: 'whs_2', fingerprint: 'fp2' }, now })
        .then([
          {
            type: 'WebhookSecretRotated.v1',
            data: {
              secretId: 'whs_2',
              fingerprint: 'fp2',
              previousSecretId: 'whs_1',
              previousSecretExpiresAt: '2026-05-02T12:00:00.000Z',
              rotatedAt: now.toISOString(),
            },
          },
        ]);
    });

    it('rotating again inside the window makes the just-replaced secret the previous one (one slot)', () => {
      const state = [
        created,
        { type: 'WebhookSecretIssued.v1', data: { ...secret, issuedAt: now.toISOString() } } as MerchantEvent,
        {
          type: 'WebhookSecretRotated.v1',
          data: {
            secretId: 'whs_2',
            fingerprint: 'fp2',
            previousSecretId: 'whs_1',
            previousSecretExpiresAt: 'x',
            rotatedAt: 'x',
          },
        } as MerchantEvent,
      ].reduce(evolveMerchant, initialMerchantState());
      const [event] = decideMerchant(
        { type: 'RotateWebhookSecret', secret: { secretId: 'whs_3', fingerprint: 'fp3' }, now },
        state,
      );
      expect(event).toMatchObject({ data: { secretId: 'whs_3', previousSecretId: 'whs_2' } });
    });

    it('cannot rotate before a secret exists', () => {
      given(created)
        .when({ type: 'RotateWebhookSecret', secret, now })
        .thenError({ status: 400, code: 'webhook_not_configured' });
    });
  });

  describe('a merchant-signed change relayed on chain', () => {
    it('records the values the chain now holds and the transaction, changing no setting', () => {
      const change = {
        type: 'RecordMerchantChangeOnChain',
        chain: 'eip155:8453',
        signer: SIGNER,
        settlement: PAUSER,
        txHash: `0x${'ab'.repeat(32)}`,
        now,
      } as const;
      given(created)
        .when(change)
        .then([
          {
            type: 'MerchantChangedOnChain.v1',
            data: {
              chain: 'eip155:8453',
              signer: SIGNER,
              settlement: PAUSER,
              txHash: change.txHash,
              changedAt: now.toISOString(),
            },
          },
        ]);
      const before = [created].reduce(evolveMerchant, initialMerchantState());
      expect(evolveMerchant(before, decideMerchant(change, before)[0] as MerchantEvent)).toEqual(before);
    });
    it('needs the merchant to exist', () => {
      given()
        .when({
          type: 'RecordMerchantChangeOnChain',
          chain: 'eip155:8453',
          signer: SIGNER,
          settlement: PAUSER,
          txHash: '0x1',
          now,
        })
        .thenError({ status: 404 });
    });
  });

  describe('pause declaration rules, in SPEC order', () => {
    it('needs an EVM signer first: 400 evm_payment_config_missing', () => {
      given(created).when(declare()).thenError({ status: 400, code: 'evm_payment_config_missing' });
    });
    it('is locked once the manager is deployed: 422 pauser_locked_by_deployment (checked before the other 422s)', () => {
      given(created, signerRegistered, {
        type: 'SubscriptionManagerDeployed.v1',
        data: { chain: 'eip155:8453', address: OPERATOR, deployedAt: 'x' },
      })
        .when(declare({ merchantPauser: OPERATOR, recoveredSigner: null }))
        .thenError({ status: 422, type: 'cannot_process', code: 'pauser_locked_by_deployment' });
    });
    it("refuses the operator's own pauser: 422 pauser_is_exodus_pauser", () => {
      given(created, signerRegistered)
        .when(declare({ merchantPauser: OPERATOR.toUpperCase().replace('0X', '0x'), recoveredSigner: null }))
        .thenError({ status: 422, code: 'pauser_is_exodus_pauser' });
    });
    it('needs proof of control: 422 pauser_control_unproven', () => {
      given(created, signerRegistered)
        .when(declare({ recoveredSigner: SIGNER }))
        .thenError({ status: 422, code: 'pauser_control_unproven' });
    });
    it('accepts a contract account that approves the message instead of a signature', () => {
      expect(
        decideMerchant(
          declare({ recoveredSigner: null, contractApproved: true }),
          [created, signerRegistered].reduce(evolveMerchant, initialMerchantState()),
        ),
      ).toHaveLength(1);
    });
    it('needs the shared-key risk acknowledged when pauser = signer: 422 shared_pauser_risk_unacknowledged', () => {
      given(created, signerRegistered)
        .when(declare({ merchantPauser: SIGNER, recoveredSigner: SIGNER }))
        .thenError({ status: 422, code: 'shared_pauser_risk_unacknowledged' });
      given(created, signerRegistered)
        .when(declare({ merchantPauser: SIGNER, recoveredSigner: SIGNER, acknowledgeSharedPauserRisk: true }))
        .then([
          {
            type: 'PauserDeclared.v1',
            data: {
              merchantPauser: SIGNER,
              sharedPauserRiskAcknowledged: true,
              declaredAt: now.toISOString(),
            },
          },
        ]);
    });
  });

  it('branding colors: exactly # + 6 hex, null resets, shorthand rejected', () => {
    expect(requireBrandingColor('primary_color', '#a1b2c3')).toBe('#A1B2C3');
    expect(requireBrandingColor('primary_color', null)).toBeNull();
    for (const bad of ['#fff', 'a1b2c3', '#a1b2c3d', '#ggg000', 'red']) {
      expect(() => requireBrandingColor('primary_color', bad)).toThrow(
        expect.objectContaining({ param: 'primary_color', type: 'validation_error' }),
      );
    }
  });

  it('the declaration message binds merchant and mode', () => {
    expect(pauserDeclarationMessage('mer_1', 'test')).toContain('Merchant: mer_1\nMode: test');
  });
});

describe('fiat settlement configuration (SPEC Rules 8: a complete configuration before a fiat-settled business prices)', () => {
  const complete = {
    currency: 'ARS',
    beneficiaryName: 'Acme SA',
    bankName: 'Banco Ejemplo',
    accountNumber: '0000003100010000000001',
    bankCode: null,
    country: 'AR',
  };

  it('records the whole configuration after a change', () => {
    given(created)
      .when({ type: 'ConfigureSettlement', fiat: { currency: 'ARS' }, now })
      .then([
        {
          type: 'FiatSettlementConfigured.v1',
          data: {
            fiat: {
              currency: 'ARS',
              beneficiaryName: null,
              bankName: null,
              accountNumber: null,
              bankCode: null,
              country: null,
            },
            configuredAt: now.toISOString(),
          },
        },
      ]);
  });

  it('merges later changes, unsets a field with null and removes the configuration with null', () => {
    const configured: MerchantEvent = {
      type: 'FiatSettlementConfigured.v1',
      data: { fiat: complete, configuredAt: now.toISOString() },
    };
    given(created, configured)
      .when({ type: 'ConfigureSettlement', fiat: { bankName: null, country: 'AR' }, now })
      .then([
        {
          type: 'FiatSettlementConfigured.v1',
          data: { fiat: { ...complete, bankName: null }, configuredAt: now.toISOString() },
        },
      ]);
    given(created, configured)
      .when({ type: 'ConfigureSettlement', fiat: null, now })
      .then([{ type: 'FiatSettlementConfigured.v1', data: { fiat: null, configuredAt: now.toISOString() } }]);
  });

  it('changes the settlement address and the fiat configuration in one decision', () => {
    given(created)
      .when({ type: 'ConfigureSettlement', settlementAddress: SIGNER, fiat: { country: 'AR' }, now })
      .then([
        {
          type: 'SettlementAddressChanged.v1',
          data: { settlementAddress: SIGNER, changedAt: now.toISOString() },
        },
        {
          type: 'FiatSettlementConfigured.v1',
          data: {
            fiat: {
              currency: null,
              beneficiaryName: null,
              bankName: null,
              accountNumber: null,
              bankCode: null,
              country: 'AR',
            },
            configuredAt: now.toISOString(),
          },
        },
      ]);
  });

  it('records nothing when nothing changes', () => {
    given(created, {
      type: 'FiatSettlementConfigured.v1',
      data: { fiat: complete, configuredAt: now.toISOString() },
    })
      .when({ type: 'ConfigureSettlement', fiat: { currency: 'ARS' }, now })
      .then([]);
    given(created).when({ type: 'ConfigureSettlement', fiat: null, now }).then([]);
  });

  it('is complete with currency, beneficiary, account number and country', () => {
    expect(isFiatSettlementComplete(complete)).toBe(true);
    expect(isFiatSettlementComplete(null)).toBe(false);
    expect(missingFiatSettlementFields({ ...complete, accountNumber: null, country: null })).toEqual([
      'accountNumber',
      'country',
    ]);
  });
});

describe('the decider refuses what the settings read model cannot hold (400 with param, nothing recorded)', () => {
  const secret = { secretId: 'whs_1', fingerprint: 'f' };
  const profile = (over: Record<string, unknown>): MerchantCommand =>
    ({ type: 'UpdateProfile', candidateSecret: secret, now, ...over }) as unknown as MerchantCommand;
  const ZERO = '0x0000000000000000000000000000000000000000';

  it.each([
    ['null', null],
    ['a number', 42],
    ['empty', ''],
    ['only spaces', '   '],
    ['101 characters', 'x'.repeat(101)],
    ['a control character', 'Acme\u0007'],
    ['a NUL', 'Ac\u0000me'],
  ])('display_name %s', (_label, displayName) => {
    given(created)
      .when(profile({ displayName }))
      .thenError({ type: 'validation_error', param: 'display_name' });
  });

  it.each([
    ['zero-width space and word joiner', '\u200B\u2060'],
    ['a BOM and a blank Braille pattern', '\uFEFF\u2800'],
    ['Hangul fillers', '\u3164\u115F\u1160\uFFA0'],
    ['an ideographic space and a variation selector', '\u3000\uFE0F'],
    ['tag characters', '\u{E0041}\u{E0042}'],
    ['combining marks alone', '\u0301\u0308'],
    ['a combining mark after invisible characters', '\u200B\u0301\u2800'],
  ])(
    'refuses a display_name of %s: it has no visible character for the hosted pages',
    (_label, displayName) => {
      given(created).when(profile({ displayName })).thenError({
        status: 400,
        type: 'validation_error',
        param: 'display_name',
        message:
          'display_name must contain a visible character, not only spaces, invisible characters or combining marks.',
      });
    },
  );

  it('counts a display name in characters (code points), so 100 emoji fit and 101 do not', () => {
    const emoji = '\u{1F600}';
    expect(
      decideMerchant(
        profile({ displayName: emoji.repeat(100) }),
        evolveMerchant(initialMerchantState(), created),
      ),
    ).toHaveLength(1);
    given(created)
      .when(profile({ displayName: emoji.repeat(101) }))
      .thenError({
        param: 'display_name',
        message: 'display_name must be at most 100 characters (101 given).',
      });
  });

  it('tells a display_name that is not a string so, not a length', () => {
    given(created)
      .when(profile({ displayName: 42 }))
      .thenError({
        param: 'display_name',
        message: 'display_name must be a string (text of 1 to 100 characters).',
      });
  });

  it('accepts a display name whose accent is a combining mark', () => {
    expect(
      decideMerchant(profile({ displayName: 'Cafe\u0301' }), evolveMerchant(initialMerchantState(), created)),
    ).toEqual([
      {
        type: 'MerchantProfileUpdated.v1',
        data: { displayName: 'Cafe\u0301', updatedAt: now.toISOString() },
      },
    ]);
  });

  it('accepts a display name of 100 characters', () => {
    expect(
      decideMerchant(
        profile({ displayName: 'y'.repeat(100) }),
        evolveMerchant(initialMerchantState(), created),
      ),
    ).toHaveLength(1);
  });

  it.each([
    ['webhook_url', { webhookUrl: 7 }],
    ['webhook_url', { webhookUrl: 'https://x.example/' + 'a'.repeat(2048) }],
    ['background_color', { backgroundColor: '#fff' }],
    ['primary_color', { primaryColor: 12 }],
    ['webhook_event_types', { webhookEventTypes: 'subscription_checkout.created' }],
    ['webhook_event_types', { webhookEventTypes: [null] }],
  ])('%s of the wrong type or shape', (param, over) => {
    given(created).when(profile(over)).thenError({ type: 'validation_error', param });
  });

  it('a merchant name must be 1 to 100 characters of text', () => {
    for (const name of [null, '', ' ', 'n'.repeat(101)]) {
      given()
        .when({
          type: 'CreateMerchant',
          merchantId: 'mer_1',
          name: name as unknown as string,
          mode: 'test',
          settlementMode: 'crypto',
          apiKeyHash: 'h',
          apiKeyHint: 'sk_test_...abcd',
          now,
        })
        .thenError({ type: 'validation_error', param: 'name' });
    }
  });

  it('the zero address is neither a merchant signer nor a settlement address', () => {
    given(created)
      .when({ type: 'RegisterSigner', merchantSigner: ZERO, now })
      .thenError({ type: 'validation_error', param: 'merchant_signer' });
    given(created)
      .when({ type: 'RegisterSigner', merchantSigner: SIGNER, settlementAddress: ZERO, now })
      .thenError({ type: 'validation_error', param: 'settlement_address' });
    given(created)
      .when({ type: 'UpdateSettlementAddress', settlementAddress: ZERO, now })
      .thenError({ type: 'validation_error', param: 'settlement_address' });
    given(created)
      .when({ type: 'ConfigureSettlement', settlementAddress: ZERO, now })
      .thenError({ type: 'validation_error', param: 'settlement_address' });
    given(created)
      .when({ type: 'UpdateSettlementAddress', settlementAddress: 'not an address', now })
      .thenError({ type: 'validation_error', param: 'settlement_address' });
  });
});

describe('SetBetaFeatures (operator: payouts beta per account)', () => {
  const enabled: MerchantEvent = {
    type: 'MerchantBetaFeaturesSet.v1',
    data: { features: { payouts: true }, setAt: now.toISOString() },
  };

  it('enabling payouts records the feature that changed', () => {
    given(created)
      .when({ type: 'SetBetaFeatures', features: { payouts: true }, now })
      .then([enabled]);
  });

  it('setting what is already set appends nothing', () => {
    given(created, enabled)
      .when({ type: 'SetBetaFeatures', features: { payouts: true }, now })
      .then([]);
    given(created)
      .when({ type: 'SetBetaFeatures', features: { payouts: false }, now })
      .then([]);
  });

  it('an unknown feature or a non-boolean value is refused naming it', () => {
    given(created)
      .when({ type: 'SetBetaFeatures', features: { payoutz: true }, now })
      .thenError({ status: 400, code: 'unknown_parameter', param: 'payoutz' });
    given(created)
      .when({ type: 'SetBetaFeatures', features: { payouts: 'yes' }, now })
      .thenError({ status: 400, type: 'validation_error', param: 'payouts' });
  });
});
