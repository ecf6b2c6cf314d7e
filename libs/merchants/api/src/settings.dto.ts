import {
  IsBoolean,
  IsIn,
  IsOptional,
  IsString,
  Length,
  ValidateIf,
  IsArray,
  ArrayMaxSize,
} from 'class-validator';

export class RegisterSignerDto {
  @IsString()
  merchant_signer!: string;

  @IsOptional()
  @IsString()
  settlement_address?: string;
}

export class UpdateSettlementDto {
  @IsString()
  settlement_address!: string;
}

/** PATCH /settings: each field optional; `null` clears webhook_url and resets a color to the default. */
export class UpdateProfileDto {
  // Absent leaves it; null is not "unset" here (a display name always exists), so it fails as a non-string.
  @ValidateIf((_o, v) => v !== undefined)
  @IsString()
  @Length(1, 100)
  display_name?: string;

  @ValidateIf((_o, v) => v !== null && v !== undefined)
  @IsString()
  webhook_url?: string | null;

  @ValidateIf((_o, v) => v !== null && v !== undefined)
  @IsString()
  background_color?: string | null;

  @ValidateIf((_o, v) => v !== null && v !== undefined)
  @IsString()
  primary_color?: string | null;

  @ValidateIf((_o, v) => v !== null && v !== undefined)
  @IsArray()
  @ArrayMaxSize(100)
  @IsString({ each: true })
  webhook_event_types?: string[] | null;
}

export class CreateMerchantDto {
  @IsString()
  @Length(1, 100)
  name!: string;

  @IsIn(['test', 'live'])
  mode!: 'test' | 'live';

  @IsOptional()
  @IsIn(['crypto', 'fiat'])
  settlement_mode?: 'crypto' | 'fiat';
}

/** Kept for documentation; POST /settings/pauser validates by hand because SPEC wants invalid_request there. */
export class DeclarePauserDto {
  @IsString()
  merchant_pauser!: string;

  @IsString()
  signature!: string;

  @IsOptional()
  @IsBoolean()
  acknowledge_shared_pauser_risk?: boolean;
}
