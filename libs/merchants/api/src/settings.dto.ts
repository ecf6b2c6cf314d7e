import { IsBoolean, IsIn, IsOptional, IsString, ValidateIf, IsArray, ArrayMaxSize } from 'class-validator';
import { fieldFault } from '@stablepay/util';

const NAME = 'a string of 1 to 100 characters';

const notAnEventTypeList = (value: unknown): string =>
  fieldFault('webhook_event_types', value, 'an array of webhook event type names (or null for all)');

const ADDRESS = 'an EVM address (0x followed by 40 hex digits)';

// A missing field is told it is required and what it holds, not that "undefined" is no string.
export class RegisterSignerDto {
  @IsString({
    message: ({ value }) => fieldFault('merchant_signer', value, `${ADDRESS}, your merchant signer`),
  })
  merchant_signer!: string;

  @IsOptional()
  @IsString({ message: ({ value }) => fieldFault('settlement_address', value, ADDRESS) })
  settlement_address?: string;
}

export class UpdateSettlementDto {
  @IsString({ message: ({ value }) => fieldFault('settlement_address', value, ADDRESS) })
  settlement_address!: string;
}

/** PATCH /settings: each field optional; `null` clears webhook_url and resets a color to the default. */
export class UpdateProfileDto {
  // Absent leaves it; null is not "unset" here (a display name always exists), so it fails as a non-string. The
  // length (1 to 100 code points) is the domain's requireName: class-validator's Length counts differently and,
  // reported first, told a number it was too short.
  @ValidateIf((_o, v) => v !== undefined)
  @IsString({ message: ({ value }) => fieldFault('display_name', value, NAME) })
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

  // A value that is not an array fails every rule here, and the first one reported was the size or the element
  // rule ("no more than 100 elements" for a string): each says what the field is when it is not an array.
  @ValidateIf((_o, v) => v !== null && v !== undefined)
  @IsArray({ message: ({ value }) => notAnEventTypeList(value) })
  @ArrayMaxSize(100, {
    message: ({ value }) =>
      Array.isArray(value)
        ? 'webhook_event_types must contain no more than 100 elements'
        : notAnEventTypeList(value),
  })
  @IsString({
    each: true,
    message: ({ value }) =>
      Array.isArray(value)
        ? 'webhook_event_types must contain webhook event type names only (strings).'
        : notAnEventTypeList(value),
  })
  webhook_event_types?: string[] | null;
}

export class CreateMerchantDto {
  // Length and display rules: the domain's requireName, as for display_name.
  @IsString({ message: ({ value }) => fieldFault('name', value, NAME) })
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
