import { IsIn, IsObject, IsOptional, IsString } from 'class-validator';

/**
 * The bodies of the payouts routes (beta). Types are checked here (400 validation_error naming the field; unknown
 * fields are refused by the validation pipe); every value rule lives in the aggregates (libs/payouts/domain).
 */
export class CreateCustomerDto {
  @IsOptional()
  @IsIn(['individual', 'business'], { message: 'type must be individual or business' })
  type?: string;

  @IsOptional()
  @IsString({ message: "name must be the customer's legal name" })
  name?: string;

  @IsOptional()
  @IsString({ message: "email must be the customer's email address" })
  email?: string;

  @IsOptional()
  @IsObject({ message: 'metadata must be an object of string values' })
  metadata?: Record<string, unknown>;
}

export class CreateBeneficiaryDto {
  @IsOptional()
  @IsString({ message: 'holder_name must be the account holder name' })
  holder_name?: string;

  @IsOptional()
  @IsString({ message: 'country must be a two-letter ISO 3166 country code' })
  country?: string;

  @IsOptional()
  @IsString({ message: 'currency must be a three-letter ISO 4217 code' })
  currency?: string;

  @IsOptional()
  @IsString({ message: 'iban must be an IBAN' })
  iban?: string;

  @IsOptional()
  @IsString({ message: 'bic must be a BIC (SWIFT code)' })
  bic?: string;

  @IsOptional()
  @IsString({ message: 'account_number must be a string of digits' })
  account_number?: string;

  @IsOptional()
  @IsString({ message: 'routing_number must be a nine-digit ABA routing number' })
  routing_number?: string;

  @IsOptional()
  @IsObject({ message: 'metadata must be an object of string values' })
  metadata?: Record<string, unknown>;
}

export class CreatePayoutDto {
  @IsOptional()
  @IsString({ message: 'customer must be a customer id (cus_...)' })
  customer?: string;

  @IsOptional()
  @IsString({ message: 'beneficiary must be a beneficiary id (bnf_...)' })
  beneficiary?: string;

  @IsOptional()
  @IsString({ message: 'amount must be a string of digits (token minor units)' })
  amount?: string;

  @IsOptional()
  @IsString({ message: 'currency must be a three-letter ISO 4217 code' })
  currency?: string;

  @IsOptional()
  @IsString({ message: 'chain must be a CAIP-2 chain id such as eip155:8453' })
  chain?: string;

  @IsOptional()
  @IsString({ message: 'token must be a token symbol such as USDC' })
  token?: string;

  @IsOptional()
  @IsObject({ message: 'metadata must be an object of string values' })
  metadata?: Record<string, unknown>;
}

export class SimulateDepositDto {
  @IsOptional()
  @IsString({ message: 'chain must be a CAIP-2 chain id such as eip155:8453' })
  chain?: string;

  @IsOptional()
  @IsString({ message: 'token must be a token symbol such as USDC' })
  token?: string;

  @IsOptional()
  @IsString({ message: 'amount must be a string of digits (token minor units)' })
  amount?: string;

  @IsOptional()
  @IsString({ message: 'from must be the sending wallet address' })
  from?: string;
}

/**
 * POST /payouts/:id/refund_held: the merchant signer's PayoutRefund. `deadline` is unix seconds as a number or a
 * decimal string (a uint256 outgrows a JSON number), so its type is checked with its value, in the domain.
 */
export class RefundHeldDto {
  @IsOptional()
  deadline?: unknown;

  @IsOptional()
  @IsString({ message: "signature must be the merchant signer's 0x-hex PayoutRefund signature" })
  signature?: string;

  /** The destination the signature names: required for a minted deposit, refused for any other (docs/payouts.md). */
  @IsOptional()
  @IsString({ message: 'to must be the 0x-hex address the PayoutRefund signature names' })
  to?: string;
}

/** The DTO as the aggregate's input: absent and null fields are left out. */
export function definedFields<T extends object>(dto: object): T {
  return Object.fromEntries(
    Object.entries(dto).filter(([, value]) => value !== undefined && value !== null),
  ) as T;
}
