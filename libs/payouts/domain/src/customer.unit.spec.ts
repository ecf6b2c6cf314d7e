import { DomainError } from '@stablepay/util';
import {
  type CustomerCommand,
  customerDecider,
  type CustomerEvent,
  customerObject,
  type CustomerState,
} from './customer';

const now = new Date('2026-06-01T10:00:00.000Z');
const later = (ms: number) => new Date(now.getTime() + ms);
const ADDRESS = '0x1111111111111111111111111111111111111111';

const given = (events: CustomerEvent[]): CustomerState =>
  events.reduce(customerDecider.evolve, customerDecider.initialState());
const when = (state: CustomerState, command: CustomerCommand) => customerDecider.decide(command, state);
const errorOf = (f: () => unknown): DomainError => {
  try {
    f();
  } catch (e) {
    if (e instanceof DomainError) return e;
  }
  throw new Error('expected a DomainError');
};

const create = (input: Record<string, unknown> = {}): CustomerCommand => ({
  type: 'CreateCustomer',
  id: 'cus_01',
  input: { name: 'Ada Lovelace', email: 'Ada@Example.com', ...input },
  depositAddresses: [{ address: ADDRESS, chains: ['Base'], tokens: ['USDC'] }],
  kycSessionId: 'kycs_1',
  hostedUrl: 'https://pay.example/hosted',
  now,
});
const created = (): CustomerEvent[] => when(given([]), create());
const outcome = (
  result: Extract<CustomerCommand, { type: 'RecordKycOutcome' }>['result'],
  sessionId = 'kycs_1',
  at = later(1000),
): CustomerCommand => ({ type: 'RecordKycOutcome', sessionId, result, nextSessionId: 'kycs_2', now: at });

describe('Customer aggregate', () => {
  it('a new customer is kyc_pending with a KYC link that expires after 24 hours and its deposit addresses', () => {
    const object = customerObject(given(created()));
    expect(object).toMatchObject({
      id: 'cus_01',
      type: 'individual',
      email: 'ada@example.com',
      status: 'kyc_pending',
      kyc_url: 'https://pay.example/hosted/kyc/kycs_1',
      kyc_url_expires_at: '2026-06-02T10:00:00.000Z',
      deposit_addresses: [{ address: ADDRESS, chains: ['Base'], tokens: ['USDC'] }],
    });
  });

  it.each([
    [{ name: undefined }, 'name'],
    [{ email: 'not-an-email' }, 'email'],
    [{ type: 'company' }, 'type'],
    [{ metadata: { plan: 3 } }, 'metadata[plan]'],
  ])('a create with %j is refused naming %s', (input, param) => {
    const error = errorOf(() => when(given([]), create(input)));
    expect([error.status, error.type, error.param]).toEqual([400, 'validation_error', param]);
  });

  it.each(['\u200b', '\u202eevil', 'A\nB', 'A\u0007B', 'A\u2028B', '\u0085'])(
    'a name of %j (invisible, bidi override, control or separator) is 400 naming name; a plain name passes',
    (name) => {
      const error = errorOf(() => when(given([]), create({ name })));
      expect([error.status, error.type, error.param]).toEqual([400, 'validation_error', 'name']);
      expect(when(given([]), create({ name: 'Zoë Łukasz-Ñandú' }))).toHaveLength(1);
    },
  );

  it('an approved KYC activates the customer and closes its link', () => {
    const state = given([...created(), ...when(given(created()), outcome({ outcome: 'approved' }))]);
    expect(customerObject(state)).toMatchObject({ status: 'active', kyc_url: null });
  });

  it('action_required opens a fresh link; the old one is refused, the fresh one activates', () => {
    const first = [
      ...created(),
      ...when(given(created()), outcome({ outcome: 'action_required', reason: 'document_unreadable' })),
    ];
    expect(customerObject(given(first))).toMatchObject({
      status: 'action_required',
      status_reason: 'document_unreadable',
      kyc_url: 'https://pay.example/hosted/kyc/kycs_2',
    });
    expect(errorOf(() => when(given(first), outcome({ outcome: 'approved' }))).code).toBe('kyc_session_used');
    expect(when(given(first), outcome({ outcome: 'approved' }, 'kycs_2'))[0]?.type).toBe(
      'CustomerActivated.v1',
    );
  });

  it('a rejected KYC is kyc_failed for good', () => {
    const failed = [
      ...created(),
      ...when(given(created()), outcome({ outcome: 'rejected', reason: 'identity_not_verified' })),
    ];
    expect(customerObject(given(failed))).toMatchObject({ status: 'kyc_failed', kyc_url: null });
    expect(errorOf(() => when(given(failed), outcome({ outcome: 'approved' }, 'kycs_2'))).status).toBe(409);
  });

  it('an expired link is refused and changes nothing', () => {
    const error = errorOf(() =>
      when(given(created()), outcome({ outcome: 'approved' }, 'kycs_1', later(24 * 3600 * 1000))),
    );
    expect([error.status, error.code]).toEqual([409, 'kyc_session_expired']);
  });

  it('only an active customer is suspended; suspending twice appends nothing', () => {
    const suspend: CustomerCommand = { type: 'SuspendCustomer', reason: 'compliance_review', now: later(5) };
    expect(errorOf(() => when(given(created()), suspend)).code).toBe('customer_not_active');
    const active = [...created(), ...when(given(created()), outcome({ outcome: 'approved' }))];
    const suspended = [...active, ...when(given(active), suspend)];
    expect(customerObject(given(suspended))).toMatchObject({
      status: 'suspended',
      status_reason: 'compliance_review',
    });
    expect(when(given(suspended), suspend)).toEqual([]);
  });

  it('a kyc_pending customer whose link expired gets a fresh one (24 h from now); the fresh one activates', () => {
    const expiredAt = later(25 * 3600 * 1000);
    const issue: CustomerCommand = { type: 'IssueKycLink', sessionId: 'kycs_9', now: expiredAt };
    const reissued = [...created(), ...when(given(created()), issue)];
    expect(reissued.at(-1)?.type).toBe('CustomerKycLinkIssued.v1');
    expect(customerObject(given(reissued))).toMatchObject({
      status: 'kyc_pending',
      kyc_url: 'https://pay.example/hosted/kyc/kycs_9',
      kyc_url_expires_at: new Date(expiredAt.getTime() + 24 * 3600 * 1000).toISOString(),
    });
    // The same request again issues nothing; the replaced link records nothing.
    expect(when(given(reissued), issue)).toEqual([]);
    const old = errorOf(() => when(given(reissued), outcome({ outcome: 'approved' }, 'kycs_1', expiredAt)));
    expect(old.code).toBe('kyc_session_used');
    const approved = when(given(reissued), outcome({ outcome: 'approved' }, 'kycs_9', expiredAt));
    expect(customerObject(given([...reissued, ...approved])).status).toBe('active');
  });

  it('an action_required customer gets a fresh link too; an active one is 409 kyc_not_required', () => {
    const asked = [
      ...created(),
      ...when(given(created()), outcome({ outcome: 'action_required', reason: 'document_unreadable' })),
    ];
    const issue: CustomerCommand = { type: 'IssueKycLink', sessionId: 'kycs_9', now: later(5000) };
    expect(when(given(asked), issue)).toHaveLength(1);
    const active = [...created(), ...when(given(created()), outcome({ outcome: 'approved' }))];
    const error = errorOf(() => when(given(active), issue));
    expect([error.status, error.code]).toEqual([409, 'kyc_not_required']);
    expect(error.message).toBe(
      'This customer is active and has no verification step to complete: a KYC link is issued only for kyc_pending or action_required customers.',
    );
  });
});
