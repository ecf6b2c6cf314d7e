import { IsArray, IsDefined, IsInt, IsObject, IsOptional, IsString } from 'class-validator';
import type { CreateCheckoutInput } from '@stablepay/payments-domain';

const AMOUNT =
  'must be a string of digits holding the order value with 6 implied decimals ("12500000" for 12.50)';

/**
 * POST /checkouts. Types are checked here (400 validation_error naming the field; unknown fields are refused);
 * every value rule lives in the Payment aggregate (libs/payments/domain). `null` means "use the default".
 */
export class CreateCheckoutDto {
  @IsDefined({ message: `amount is required and ${AMOUNT}` })
  @IsString({ message: `amount ${AMOUNT}` })
  amount!: string;

  @IsDefined({ message: 'currency is required: a three-letter ISO-4217 code such as USD' })
  @IsString({ message: 'currency must be a three-letter ISO-4217 code such as USD' })
  currency!: string;

  @IsOptional()
  @IsString({ message: 'method must be DIRECT or TWO_STEP' })
  method?: string | null;

  @IsOptional()
  @IsArray({ message: 'accepted_chains must be an array of CAIP-2 chain ids such as eip155:8453' })
  @IsString({
    each: true,
    message: 'accepted_chains must be an array of CAIP-2 chain ids such as eip155:8453',
  })
  accepted_chains?: string[] | null;

  @IsOptional()
  @IsArray({ message: 'accepted_tokens must be an array of token symbols such as USDC' })
  @IsString({ each: true, message: 'accepted_tokens must be an array of token symbols such as USDC' })
  accepted_tokens?: string[] | null;

  /** Seconds until the checkout expires: default 3600, 300 to 86400. */
  @IsOptional()
  @IsInt({ message: 'expires_in must be an integer number of seconds (300 to 86400)' })
  expires_in?: number | null;

  /** TWO_STEP only: seconds the escrow stays capturable after deployment (3600 to 2592000, default 604800). */
  @IsOptional()
  @IsInt({ message: 'authorization_period must be an integer number of seconds (3600 to 2592000)' })
  authorization_period?: number | null;

  @IsOptional()
  @IsObject({ message: 'metadata must be an object of string values' })
  metadata?: Record<string, unknown> | null;

  @IsOptional()
  @IsString({ message: 'success_url must be an absolute http(s) URL' })
  success_url?: string | null;

  @IsOptional()
  @IsString({ message: 'cancel_url must be an absolute http(s) URL' })
  cancel_url?: string | null;
}

/** The DTO as the aggregate's input: absent and null fields are left out (defaults apply). */
export function toCreateCheckoutInput(dto: object): CreateCheckoutInput {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(dto)) {
    if (value !== undefined && value !== null) out[key] = value;
  }
  return out as CreateCheckoutInput;
}
