import { Inject, Injectable } from '@nestjs/common';
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { DataSource } from 'typeorm';
import type { ChargeQuote, ChargeQuoteObject } from '@stablepay/subscriptions-domain';

/**
 * Issued charge quotes (reference quotes and price locks), owned by the subscriptions service. A quote is an offer
 * the service made, not a fact of the subscription: it is a row, and the charge that redeems it marks it used (the
 * preflight's quote_already_used). Codes are unique per merchant and mode; another merchant's code is unknown.
 */
export class CreateChargeQuotes1767400000200 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE charge_quotes (
      code text PRIMARY KEY,
      merchant_id text NOT NULL,
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      subscription_id text NOT NULL,
      kind text NOT NULL CHECK (kind IN ('reference', 'price_lock')),
      token_amount numeric(78, 0) NOT NULL,
      quote_hash text NOT NULL,
      expires_at timestamptz NOT NULL,
      used_by_charge_id text,
      object jsonb NOT NULL,
      created_at timestamptz NOT NULL
    )`);
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE charge_quotes');
  }
}

interface QuoteRow {
  code: string;
  subscription_id: string;
  kind: 'reference' | 'price_lock';
  token_amount: string;
  quote_hash: string;
  expires_at: Date;
  used_by_charge_id: string | null;
  object: ChargeQuoteObject;
}

@Injectable()
export class ChargeQuotes {
  constructor(@Inject(DataSource) private readonly dataSource: DataSource) {}

  async issue(owner: { merchantId: string; mode: 'test' | 'live' }, quote: ChargeQuoteObject): Promise<void> {
    await this.dataSource.query(
      `INSERT INTO charge_quotes (code, merchant_id, mode, subscription_id, kind, token_amount, quote_hash, expires_at, object, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10)`,
      [
        quote.quote_code,
        owner.merchantId,
        owner.mode,
        quote.subscription_id.toLowerCase(),
        quote.kind === 'price_lock' ? 'price_lock' : 'reference',
        quote.amount,
        quote.quote_hash,
        quote.expires_at,
        JSON.stringify(quote),
        quote.created_at,
      ],
    );
  }

  /** The merchant's quote with that code, as the preflight reads it; null when unknown in its scope. */
  async find(
    owner: { merchantId: string; mode: 'test' | 'live' },
    code: string,
  ): Promise<ChargeQuote | null> {
    const rows: QuoteRow[] = await this.dataSource.query(
      'SELECT * FROM charge_quotes WHERE code = $1 AND merchant_id = $2 AND mode = $3',
      [code, owner.merchantId, owner.mode],
    );
    const row = rows[0];
    if (!row) return null;
    return {
      code: row.code,
      kind: row.kind,
      subscriptionId: row.subscription_id,
      tokenAmount: BigInt(row.token_amount),
      quoteHash: row.quote_hash,
      expiresAt: new Date(row.expires_at),
      usedByChargeId: row.used_by_charge_id,
      fiatCurrency: row.object.fiat_currency,
      fiatAmount: row.object.fiat_amount ?? null,
    };
  }

  /** The charge that redeemed the quote (first one wins; a landed retry of the same charge is the same id). */
  async markUsed(code: string, chargeId: string): Promise<void> {
    await this.dataSource.query(
      'UPDATE charge_quotes SET used_by_charge_id = $2 WHERE code = $1 AND used_by_charge_id IS NULL',
      [code, chargeId],
    );
  }
}
