import { DomainError } from '@stablepay/util';
import type { SubscriptionChargeObject } from './charge';
import { chargeMatches, parseChargeListFilter } from './charge-list-filter';
import { type LedgerRow, upsertLedgerRow } from './ledger-sequence';

describe('Ledger sequence: cursors on a monotonic sequence', () => {
  it('a row keeps the sequence of its first write through merges; a late row gets the next one (the head)', () => {
    let seq = 0n;
    const next = () => ++seq;
    const a = upsertLedgerRow<string>(null, 'charge a (api)', next);
    const b = upsertLedgerRow<string>(null, 'charge b (api)', next);
    const aMerged = upsertLedgerRow<string>(a, 'charge a (indexer merged)', next);
    const late = upsertLedgerRow<string>(null, 'charge c (indexer, late)', next);
    const rows: LedgerRow<string>[] = [aMerged, b, late];
    expect(rows.map((r) => r.seq)).toEqual([1n, 2n, 3n]);
    expect(aMerged.row).toBe('charge a (indexer merged)');
    // Newest first: the late row heads the list; a page read before it (rows after seq 3) is unchanged.
    expect([...rows].sort((x, y) => Number(y.seq - x.seq)).map((r) => r.seq)).toEqual([3n, 2n, 1n]);
  });
});

describe('Charge list filters (SPEC: subscription, subscriber, date range, status, chain)', () => {
  const charge = (over: Partial<SubscriptionChargeObject> = {}): SubscriptionChargeObject => ({
    object: 'subscription_charge',
    id: 'subc_1',
    subscription_id: `0x${'5a'.repeat(32)}`,
    subscriber: '0xAbCd000000000000000000000000000000000001',
    amount: '1',
    fee: '0',
    tx_hash: null,
    chain: 'eip155:8453',
    charge_nonce: 1,
    charged_at: '2026-06-01T10:00:00.000Z',
    block_number: '0',
    created_at: '2026-06-01T10:00:00.000Z',
    status: 'failed',
    failure_reason: 'BudgetExceeded',
    fiat_amount: null,
    fiat_currency: null,
    settlement_status: null,
    settlement_exposure: null,
    ...over,
  });

  it('matches on every filter, ids case-insensitively, charged_from inclusive and charged_to exclusive', () => {
    const f = parseChargeListFilter({
      subscription_id: `0x${'5A'.repeat(32)}`,
      subscriber: '0xabcd000000000000000000000000000000000001',
      status: 'failed',
      chain: 'eip155:8453',
      charged_from: '2026-06-01T10:00:00Z',
      charged_to: '2026-06-01T10:00:01Z',
    });
    expect(chargeMatches(f, charge())).toBe(true);
    expect(chargeMatches(f, charge({ status: 'succeeded' }))).toBe(false);
    expect(chargeMatches(f, charge({ chain: 'eip155:137' }))).toBe(false);
    expect(chargeMatches(f, charge({ charged_at: '2026-06-01T10:00:01.000Z' }))).toBe(false);
    expect(chargeMatches(parseChargeListFilter({}), charge())).toBe(true);
  });

  it('takes charged_from and charged_to in the forms of every list time bound: a date (midnight UTC) or Unix seconds', () => {
    const f = parseChargeListFilter({ charged_from: '2026-06-01', charged_to: '1780358400' });
    expect(f).toEqual({
      chargedFrom: new Date('2026-06-01T00:00:00Z'),
      chargedTo: new Date('2026-06-02T00:00:00Z'),
    });
    expect(chargeMatches(f, charge())).toBe(true);
    expect(chargeMatches(f, charge({ charged_at: '2026-06-02T00:00:00.000Z' }))).toBe(false);
  });

  it.each([
    [{ subscription_id: 'abc' }, 'subscription_id'],
    [{ subscriber: '0x12' }, 'subscriber'],
    // A typo in a checksummed address listed no charges (200, empty) instead of saying so.
    [{ subscriber: '0xAbCd000000000000000000000000000000000001' }, 'subscriber'],
    [{ status: 'pending' }, 'status'],
    [{ chain: 'solana:1' }, 'chain'],
    [{ charged_from: 'yesterday' }, 'charged_from'],
    // Year 1 an hour east of UTC is year 0 in UTC: PostgreSQL refused it and the list answered 500.
    [{ charged_from: '0001-01-01T00:00:00+01:00' }, 'charged_from'],
    [{ charged_to: '0000-01-01T00:00:00Z' }, 'charged_to'],
    [{ charged_from: '2026-02-29T00:00:00Z' }, 'charged_from'],
    [{ charged_from: '2026-06-02T00:00:00Z', charged_to: '2026-06-01T00:00:00Z' }, 'charged_to'],
  ])('rejects %j naming the parameter', (query, param) => {
    let error: unknown;
    try {
      parseChargeListFilter(query);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(DomainError);
    expect(error).toMatchObject({ status: 400, type: 'validation_error', param });
  });
});
