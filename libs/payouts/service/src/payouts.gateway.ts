import { Inject, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { CommandClient } from '@stablepay/commands';
import { type AuthenticatedMerchant, type ListEnvelope, listEnvelope, type ListQuery } from '@stablepay/http';
import {
  type CustomerListFilters,
  type HostedKycView,
  PAYOUTS_COMMANDS,
  type PayoutListFilters,
  type PayoutsCommandResult,
  type PayoutsUseCases,
  type SimulateDepositInput,
  type SimulatedDepositResource,
} from '@stablepay/payouts-api';
import type {
  BeneficiaryObject,
  CreateBeneficiaryInput,
  CreateCustomerInput,
  CreatePayoutInput,
  CustomerObject,
  PayoutObject,
  RefundHeldInput,
} from '@stablepay/payouts-domain';
import { CLOCK } from '@stablepay/aggregate';
import { type Clock, DomainError } from '@stablepay/util';
import { PayoutsReader, type PayoutsResource } from './read-model/payouts.reader';

/**
 * The gateway's side of the payouts use cases (the port its controllers call): commands go to the payouts service,
 * which owns the aggregates, through the CommandClient; the answer's revision is awaited in the read model
 * (read-your-writes), which is also where every read comes from.
 */
@Injectable()
export class PayoutsGateway implements PayoutsUseCases {
  constructor(
    @Inject(CommandClient) private readonly commands: CommandClient,
    @Inject(PayoutsReader) private readonly reader: PayoutsReader,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  betaEnabled(merchant: AuthenticatedMerchant): Promise<boolean> {
    return this.reader.betaEnabled(merchant.merchantId);
  }

  private async send<R extends PayoutsResource>(
    resource: R,
    pattern: string,
    payload: object,
  ): Promise<Awaited<ReturnType<PayoutsReader['getAtLeast']>>['object']> {
    const done = await this.commands.send<PayoutsCommandResult>('payouts', pattern, payload);
    return (await this.reader.getAtLeast(resource, done.id, done.revision)).object;
  }

  async createCustomer(
    merchant: AuthenticatedMerchant,
    input: CreateCustomerInput,
    origin: string,
    idempotencyKey?: string,
  ): Promise<CustomerObject> {
    return (await this.send('customer', PAYOUTS_COMMANDS.createCustomer, {
      commandId: idempotencyKey ?? randomUUID(),
      merchant,
      input,
      origin,
    })) as CustomerObject;
  }

  async retrieveCustomer(merchant: AuthenticatedMerchant, id: string): Promise<CustomerObject> {
    return (await this.reader.getOwned('customer', merchant, id)).object;
  }

  async issueKycLink(
    merchant: AuthenticatedMerchant,
    customerId: string,
    idempotencyKey?: string,
  ): Promise<CustomerObject> {
    return (await this.send('customer', PAYOUTS_COMMANDS.issueKycLink, {
      commandId: idempotencyKey ?? randomUUID(),
      merchant,
      customerId,
    })) as CustomerObject;
  }

  async listCustomers(
    merchant: AuthenticatedMerchant,
    query: ListQuery,
    filters: CustomerListFilters,
  ): Promise<ListEnvelope<CustomerObject>> {
    const { rows, hasMore } = await this.reader.list(
      'customer',
      merchant,
      query,
      this.reader.customerFilters(filters),
    );
    return listEnvelope(
      rows.map((r) => r.object),
      hasMore,
    );
  }

  async createBeneficiary(
    merchant: AuthenticatedMerchant,
    input: CreateBeneficiaryInput,
    idempotencyKey?: string,
  ): Promise<BeneficiaryObject> {
    return (await this.send('beneficiary', PAYOUTS_COMMANDS.createBeneficiary, {
      commandId: idempotencyKey ?? randomUUID(),
      merchant,
      input,
    })) as BeneficiaryObject;
  }

  async retrieveBeneficiary(merchant: AuthenticatedMerchant, id: string): Promise<BeneficiaryObject> {
    return (await this.reader.getOwned('beneficiary', merchant, id)).object;
  }

  async listBeneficiaries(
    merchant: AuthenticatedMerchant,
    query: ListQuery,
  ): Promise<ListEnvelope<BeneficiaryObject>> {
    const { rows, hasMore } = await this.reader.list('beneficiary', merchant, query);
    return listEnvelope(
      rows.map((r) => r.object),
      hasMore,
    );
  }

  async createPayout(
    merchant: AuthenticatedMerchant,
    input: CreatePayoutInput,
    idempotencyKey?: string,
  ): Promise<PayoutObject> {
    return (await this.send('payout', PAYOUTS_COMMANDS.createPayout, {
      commandId: idempotencyKey ?? randomUUID(),
      merchant,
      input,
    })) as PayoutObject;
  }

  async refundHeld(
    merchant: AuthenticatedMerchant,
    payoutId: string,
    input: RefundHeldInput,
    idempotencyKey?: string,
  ): Promise<PayoutObject> {
    return (await this.send('payout', PAYOUTS_COMMANDS.refundHeld, {
      commandId: idempotencyKey ?? randomUUID(),
      merchant,
      payoutId,
      input,
    })) as PayoutObject;
  }

  async recordWithheldRefundReturn(
    merchantId: string,
    payoutId: string,
    input: unknown,
    idempotencyKey?: string,
  ): Promise<PayoutObject> {
    return (await this.send('payout', PAYOUTS_COMMANDS.recordWithheldRefundReturn, {
      commandId: idempotencyKey ?? randomUUID(),
      merchantId,
      payoutId,
      input,
    })) as PayoutObject;
  }

  async retrievePayout(merchant: AuthenticatedMerchant, id: string): Promise<PayoutObject> {
    return (await this.reader.getOwned('payout', merchant, id)).object;
  }

  async listPayouts(
    merchant: AuthenticatedMerchant,
    query: ListQuery,
    filters: PayoutListFilters,
  ): Promise<ListEnvelope<PayoutObject>> {
    const { rows, hasMore } = await this.reader.list(
      'payout',
      merchant,
      query,
      this.reader.payoutFilters(filters),
    );
    return listEnvelope(
      rows.map((r) => r.object),
      hasMore,
    );
  }

  async simulateDeposit(
    merchant: AuthenticatedMerchant,
    customerId: string,
    input: SimulateDepositInput,
    idempotencyKey?: string,
  ): Promise<SimulatedDepositResource> {
    const done = await this.commands.send<PayoutsCommandResult>('payouts', PAYOUTS_COMMANDS.simulateDeposit, {
      commandId: idempotencyKey ?? randomUUID(),
      merchant,
      customerId,
      input,
    });
    const payout =
      done.revision < 0 ? null : (await this.reader.getAtLeast('payout', done.id, done.revision)).object;
    return { object: 'test_helpers.deposit', customer: customerId, payout };
  }

  async hostedKyc(sessionId: string): Promise<HostedKycView | null> {
    const row = await this.reader.customerByKycSession(sessionId);
    if (!row) return null;
    const profile = await this.reader.merchantProfile(row.merchant_id);
    const o = row.object;
    let state: HostedKycView['state'];
    if (row.kyc_session_id === sessionId)
      state =
        o.kyc_url_expires_at !== null && this.clock.now().getTime() >= Date.parse(o.kyc_url_expires_at)
          ? 'expired'
          : 'open';
    else state = o.status === 'kyc_pending' ? 'used' : o.status;
    return { ...profile, state };
  }

  async submitKyc(sessionId: string): Promise<void> {
    try {
      const done = await this.commands.send<PayoutsCommandResult>('payouts', PAYOUTS_COMMANDS.submitKyc, {
        commandId: randomUUID(),
        sessionId,
      });
      // The page that follows shows the outcome: wait until the read model has it.
      await this.reader.getAtLeast('customer', done.id, done.revision);
    } catch (error) {
      // A used, expired or unknown link records nothing; the page it redirects to says which.
      if (!(error instanceof DomainError) || error.status >= 500) throw error;
    }
  }
}
