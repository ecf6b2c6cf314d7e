import type { Api, Json } from './http';

/** A customer made active through the API (its KYC step done on the hosted page): its id and first deposit address. */
export async function activeCustomer(
  api: Api,
  name: string,
  email: string,
): Promise<{ customerId: string; address: string; deposit: Json | undefined }> {
  const created = await api('POST', '/customers', { name, email });
  if (created.status !== 201) throw new Error(`customer refused: ${JSON.stringify(created.body)}`);
  const [deposit] = created.body['deposit_addresses'] as Json[];
  const kyc = await fetch(String(created.body['kyc_url']), { method: 'POST', redirect: 'manual', body: '' });
  if (kyc.status !== 303) throw new Error(`KYC step answered ${kyc.status}`);
  return { customerId: String(created.body['id']), address: String(deposit?.['address']), deposit };
}

/** A USDC payout of `amount` minor units on `chain` to a new US beneficiary, awaiting its deposit; its id. */
export async function newUsdcPayout(
  api: Api,
  customerId: string,
  amount: string,
  chain: string,
): Promise<string> {
  const beneficiary = await api('POST', '/beneficiaries', {
    holder_name: 'Ada Lovelace',
    country: 'US',
    currency: 'USD',
    account_number: '000123456789',
    routing_number: '110000000',
  });
  const payout = await api('POST', '/payouts', {
    customer: customerId,
    beneficiary: beneficiary.body['id'],
    amount,
    chain,
    token: 'USDC',
  });
  if (payout.status !== 201 || payout.body['status'] !== 'awaiting_deposit')
    throw new Error(`payout not awaiting its deposit: ${payout.status} ${JSON.stringify(payout.body)}`);
  return String(payout.body['id']);
}
