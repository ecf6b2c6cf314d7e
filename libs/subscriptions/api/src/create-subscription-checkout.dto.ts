import { IsArray, IsDefined, IsInt, IsObject, IsOptional, IsString } from 'class-validator';
import type { CreateSubscriptionCheckoutInput } from '@stablepay/subscriptions-domain';

const AMOUNT =
  'must be a string of digits in minor units of price_currency (for example "150000" for 1,500.00)';

/**
 * POST /subscription-checkouts. Types are checked here (400 validation_error naming the field; unknown fields
 * are refused); every value rule lives in the SubscriptionCheckout aggregate. `null` means "use the default".
 */
export class CreateSubscriptionCheckoutDto {
  @IsDefined({ message: `price is required and ${AMOUNT}` })
  @IsString({ message: `price ${AMOUNT}` })
  price!: string;

  @IsDefined({ message: 'price_currency is required: an ISO-4217 code such as ARS' })
  @IsString({ message: 'price_currency must be an ISO-4217 code such as ARS' })
  price_currency!: string;

  @IsOptional()
  @IsString({ message: `budget ${AMOUNT}` })
  budget?: string | null;

  @IsOptional()
  @IsString({ message: `cap ${AMOUNT}` })
  cap?: string | null;

  @IsOptional()
  @IsInt({ message: 'period_duration must be an integer number of seconds (at least 3600)' })
  period_duration?: number | null;

  @IsOptional()
  @IsArray({ message: 'supported_chains must be an array of CAIP-2 chain ids such as eip155:8453' })
  @IsString({
    each: true,
    message: 'supported_chains must be an array of CAIP-2 chain ids such as eip155:8453',
  })
  supported_chains?: string[] | null;

  @IsOptional()
  @IsObject({ message: 'metadata must be an object of string values' })
  metadata?: Record<string, unknown> | null;

  @IsOptional()
  @IsString({ message: 'external_customer_id must be a string' })
  external_customer_id?: string | null;

  @IsOptional()
  @IsString({ message: 'success_url must be an absolute http(s) URL' })
  success_url?: string | null;

  @IsOptional()
  @IsString({ message: 'cancel_url must be an absolute http(s) URL' })
  cancel_url?: string | null;

  @IsOptional()
  @IsString({ message: 'return_url must be an absolute http(s) URL' })
  return_url?: string | null;

  /** Seconds until the intent expires: default 300 (5 minutes), 60 to 86400 (24 hours). */
  @IsOptional()
  @IsInt({ message: 'expires_in must be an integer number of seconds (60 to 86400)' })
  expires_in?: number | null;
}

/** The DTO as the aggregate's input: absent and null fields are left out (defaults apply). */
export function toCreateInput(dto: CreateSubscriptionCheckoutDto): CreateSubscriptionCheckoutInput {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(dto)) {
    if (value !== undefined && value !== null) out[key] = value;
  }
  return out as CreateSubscriptionCheckoutInput;
}
