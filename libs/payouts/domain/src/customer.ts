import { conflict, notFound, parseMetadata, validationError } from '@stablepay/util';
import { requiredText } from './text';

/**
 * The Customer aggregate of payouts (beta), stream `customer-<cus_ id>` (SPEC Resources > Customer, beneficiary,
 * payout; States > Customer (payouts)). A customer is a payer who passes KYC once; its transitions are ours
 * (SPEC: "not shown"), docs/payouts.md:
 *
 *   kyc_pending --approved--> active --suspended--> suspended
 *   kyc_pending --action_required--> action_required --(fresh kyc_url) approved--> active
 *   kyc_pending | action_required --rejected--> kyc_failed (terminal)
 *
 * Every KYC attempt runs under its own session (the `kyc_url` carries its id): a session is used once, expires,
 * and action_required opens a fresh one (SPEC: "a fresh one is needed after action_required").
 */
export type CustomerStatus = 'kyc_pending' | 'action_required' | 'active' | 'kyc_failed' | 'suspended';
export type CustomerType = 'individual' | 'business';

export const CUSTOMER_CATEGORY = 'customer';
export const customerStreamId = (id: string): string => `${CUSTOMER_CATEGORY}-${id}`;
export const CUSTOMER_ID = /^cus_[0-9a-z]{26}$/;
export const KYC_SESSION_ID = /^kycs_[0-9a-z]{26}$/;

export const CUSTOMER_LIMITS = {
  /** Ours: a KYC link is valid for 24 hours (a customer finishes KYC in one sitting; a stale link is refused). */
  kycSessionTtlMs: 24 * 60 * 60 * 1000,
  maxNameLength: 200,
  maxEmailLength: 254,
} as const;

/** One deposit address and where it is valid (SPEC: `address`, `chains` as chain names, `tokens` as symbols). */
export interface DepositAddress {
  readonly address: string;
  readonly chains: readonly string[];
  readonly tokens: readonly string[];
}

export interface KycSession {
  readonly id: string;
  readonly expiresAt: string;
}

export type CustomerEvent =
  | {
      type: 'CustomerCreated.v1';
      data: {
        customerId: string;
        customerType: CustomerType;
        name: string;
        email: string;
        metadata: Record<string, string>;
        depositAddresses: DepositAddress[];
        kycSession: KycSession;
        /** `{hosted_url}` as of creation: the KYC links of this customer live under it. */
        hostedUrl: string;
        createdAt: string;
      };
    }
  | { type: 'CustomerActivated.v1'; data: { sessionId: string; activatedAt: string } }
  | {
      type: 'CustomerActionRequired.v1';
      data: { sessionId: string; reason: string; nextSession: KycSession; at: string };
    }
  | { type: 'CustomerKycFailed.v1'; data: { sessionId: string; reason: string; failedAt: string } }
  | {
      /** POST /customers/:id/kyc_links: a fresh session replaces the open one (whose link then records nothing). */
      type: 'CustomerKycLinkIssued.v1';
      data: { session: KycSession; issuedAt: string };
    }
  | { type: 'CustomerSuspended.v1'; data: { reason: string; suspendedAt: string } };

export interface CustomerState {
  readonly exists: boolean;
  readonly id: string;
  readonly customerType: CustomerType;
  readonly name: string;
  readonly email: string;
  readonly metadata: Record<string, string>;
  readonly depositAddresses: readonly DepositAddress[];
  readonly status: CustomerStatus;
  /** The open KYC session (null once used: approved, failed, or replaced by action_required's fresh one). */
  readonly kycSession: KycSession | null;
  readonly statusReason: string | null;
  readonly hostedUrl: string;
  readonly createdAt: string;
  readonly updatedAt: string;
}

export const initialCustomerState = (): CustomerState => ({
  exists: false,
  id: '',
  customerType: 'individual',
  name: '',
  email: '',
  metadata: {},
  depositAddresses: [],
  status: 'kyc_pending',
  kycSession: null,
  statusReason: null,
  hostedUrl: '',
  createdAt: '',
  updatedAt: '',
});

export function evolveCustomer(state: CustomerState, event: CustomerEvent): CustomerState {
  switch (event.type) {
    case 'CustomerCreated.v1': {
      const d = event.data;
      return {
        ...state,
        exists: true,
        id: d.customerId,
        customerType: d.customerType,
        name: d.name,
        email: d.email,
        metadata: d.metadata,
        depositAddresses: d.depositAddresses,
        status: 'kyc_pending',
        kycSession: d.kycSession,
        hostedUrl: d.hostedUrl,
        createdAt: d.createdAt,
        updatedAt: d.createdAt,
      };
    }
    case 'CustomerActivated.v1':
      return {
        ...state,
        status: 'active',
        kycSession: null,
        statusReason: null,
        updatedAt: event.data.activatedAt,
      };
    case 'CustomerActionRequired.v1':
      return {
        ...state,
        status: 'action_required',
        kycSession: event.data.nextSession,
        statusReason: event.data.reason,
        updatedAt: event.data.at,
      };
    case 'CustomerKycFailed.v1':
      return {
        ...state,
        status: 'kyc_failed',
        kycSession: null,
        statusReason: event.data.reason,
        updatedAt: event.data.failedAt,
      };
    case 'CustomerKycLinkIssued.v1':
      return { ...state, kycSession: event.data.session, updatedAt: event.data.issuedAt };
    case 'CustomerSuspended.v1':
      return {
        ...state,
        status: 'suspended',
        statusReason: event.data.reason,
        updatedAt: event.data.suspendedAt,
      };
  }
}

/** POST /customers as received (types checked by the DTO; values here). */
export interface CreateCustomerInput {
  readonly type?: unknown;
  readonly name?: unknown;
  readonly email?: unknown;
  readonly metadata?: unknown;
}

/** What the KYC provider concluded about one session (the KycProvider port's answer). */
export type KycOutcome =
  | { readonly outcome: 'approved' }
  | { readonly outcome: 'action_required'; readonly reason: string }
  | { readonly outcome: 'rejected'; readonly reason: string };

export type CustomerCommand =
  | {
      type: 'CreateCustomer';
      id: string;
      input: CreateCustomerInput;
      depositAddresses: DepositAddress[];
      kycSessionId: string;
      hostedUrl: string;
      now: Date;
    }
  | {
      /** The customer finished the hosted KYC step of `sessionId`; the provider answered `result`. */
      type: 'RecordKycOutcome';
      sessionId: string;
      result: KycOutcome;
      /** The session action_required opens (the caller draws its id; unused for other outcomes). */
      nextSessionId: string;
      now: Date;
    }
  | { type: 'SuspendCustomer'; reason: string; now: Date }
  | {
      /** A fresh KYC link (the caller draws the session id from the request's idempotency key). */
      type: 'IssueKycLink';
      sessionId: string;
      now: Date;
    };

/** The statuses whose customer still has a KYC step to complete: the only ones a fresh link is issued for. */
export const KYC_LINK_STATUSES: readonly CustomerStatus[] = ['kyc_pending', 'action_required'];

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** The input's values checked and normalised (400 validation_error naming the field). */
export function parseCreateCustomer(input: CreateCustomerInput): {
  customerType: CustomerType;
  name: string;
  email: string;
  metadata: Record<string, string>;
} {
  const type = input.type ?? 'individual';
  if (type !== 'individual' && type !== 'business')
    throw validationError('type', 'type must be individual or business.');
  const name = requiredText(input.name, 'name', CUSTOMER_LIMITS.maxNameLength, "the customer's legal name");
  const email = requiredText(
    input.email,
    'email',
    CUSTOMER_LIMITS.maxEmailLength,
    "the customer's email address",
  );
  if (!EMAIL.test(email)) throw validationError('email', 'email must be an email address.');
  return { customerType: type, name, email: email.toLowerCase(), metadata: parseMetadata(input.metadata) };
}

export function decideCustomer(command: CustomerCommand, state: CustomerState): CustomerEvent[] {
  const at = command.now.toISOString();
  switch (command.type) {
    case 'CreateCustomer': {
      if (state.exists) throw conflict('resource_exists', `Customer ${command.id} already exists.`);
      const input = parseCreateCustomer(command.input);
      return [
        {
          type: 'CustomerCreated.v1',
          data: {
            customerId: command.id,
            ...input,
            depositAddresses: command.depositAddresses,
            kycSession: { id: command.kycSessionId, expiresAt: sessionExpiry(command.now) },
            hostedUrl: command.hostedUrl,
            createdAt: at,
          },
        },
      ];
    }
    case 'RecordKycOutcome': {
      if (!state.exists) throw notFound('customer');
      const session = state.kycSession;
      // A used, replaced or expired link is refused: the hosted page shows it and nothing is recorded.
      if (!session || session.id !== command.sessionId)
        throw conflict('kyc_session_used', 'This verification link was already used.');
      if (command.now.getTime() >= Date.parse(session.expiresAt))
        throw conflict('kyc_session_expired', 'This verification link has expired.');
      const r = command.result;
      if (r.outcome === 'approved')
        return [{ type: 'CustomerActivated.v1', data: { sessionId: session.id, activatedAt: at } }];
      if (r.outcome === 'rejected')
        return [
          {
            type: 'CustomerKycFailed.v1',
            data: { sessionId: session.id, reason: r.reason, failedAt: at },
          },
        ];
      return [
        {
          type: 'CustomerActionRequired.v1',
          data: {
            sessionId: session.id,
            reason: r.reason,
            nextSession: { id: command.nextSessionId, expiresAt: sessionExpiry(command.now) },
            at,
          },
        },
      ];
    }
    case 'SuspendCustomer':
      if (!state.exists) throw notFound('customer');
      if (state.status === 'suspended') return [];
      if (state.status !== 'active')
        throw conflict('customer_not_active', `Only an active customer can be suspended (${state.status}).`);
      return [{ type: 'CustomerSuspended.v1', data: { reason: command.reason, suspendedAt: at } }];
    case 'IssueKycLink':
      if (!state.exists) throw notFound('customer');
      // The same request again (its Idempotency-Key draws the same session) issues nothing twice.
      if (state.kycSession?.id === command.sessionId) return [];
      if (!KYC_LINK_STATUSES.includes(state.status))
        throw conflict(
          'kyc_not_required',
          `This customer is ${state.status} and has no verification step to complete: a KYC link is issued only for ${KYC_LINK_STATUSES.join(' or ')} customers.`,
        );
      return [
        {
          type: 'CustomerKycLinkIssued.v1',
          data: { session: { id: command.sessionId, expiresAt: sessionExpiry(command.now) }, issuedAt: at },
        },
      ];
  }
}

function sessionExpiry(now: Date): string {
  return new Date(now.getTime() + CUSTOMER_LIMITS.kycSessionTtlMs).toISOString();
}

export const customerDecider = {
  initialState: initialCustomerState,
  evolve: evolveCustomer,
  decide: decideCustomer,
};

/** The customer as the API shows it (GET /customers/:id, lists, webhooks' data.object): a projection of state. */
export interface CustomerObject {
  readonly id: string;
  readonly object: 'customer';
  readonly type: CustomerType;
  readonly name: string;
  readonly email: string;
  readonly status: CustomerStatus;
  /** Why the customer is action_required, kyc_failed or suspended; null otherwise. */
  readonly status_reason: string | null;
  /** The open KYC link (kyc_pending, action_required); null once there is nothing left to do there. */
  readonly kyc_url: string | null;
  readonly kyc_url_expires_at: string | null;
  readonly deposit_addresses: readonly DepositAddress[];
  readonly metadata: Record<string, string>;
  readonly created_at: string;
  readonly updated_at: string;
}

/** `{hosted_url}/kyc/<session id>`: the hosted KYC page of the open session. */
export function kycUrl(hostedUrl: string, sessionId: string): string {
  return `${hostedUrl}/kyc/${sessionId}`;
}

export function customerObject(state: CustomerState): CustomerObject {
  const session = state.kycSession;
  return {
    id: state.id,
    object: 'customer',
    type: state.customerType,
    name: state.name,
    email: state.email,
    status: state.status,
    status_reason: state.statusReason,
    kyc_url: session ? kycUrl(state.hostedUrl, session.id) : null,
    kyc_url_expires_at: session?.expiresAt ?? null,
    deposit_addresses: state.depositAddresses,
    metadata: state.metadata,
    created_at: state.createdAt,
    updated_at: state.updatedAt,
  };
}

/** SPEC Payout events: the customer facts merchants are notified of (suspension is not one: shown on GET). */
export const CUSTOMER_WEBHOOK_BY_EVENT: Readonly<Record<CustomerEvent['type'], string | null>> = {
  'CustomerCreated.v1': null,
  'CustomerActivated.v1': 'customer.activated',
  'CustomerActionRequired.v1': 'customer.action_required',
  'CustomerKycFailed.v1': 'customer.kyc_failed',
  'CustomerSuspended.v1': null,
  'CustomerKycLinkIssued.v1': null,
};
