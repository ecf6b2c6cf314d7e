import { type ArgumentMetadata, ValidationPipe } from '@nestjs/common';
import { Type } from 'class-transformer';
import {
  Allow,
  ArrayMaxSize,
  IsArray,
  IsBoolean,
  IsDefined,
  IsIn,
  IsInt,
  IsObject,
  IsOptional,
  IsString,
  Length,
  Matches,
  ValidateIf,
  ValidateNested,
} from 'class-validator';
import { DomainError } from '@stablepay/util';
import { createReferenceValidationPipe, createValidationPipe } from './validation';

const AMOUNT = 'must be a string of digits';

/** The decorator combinations the API's DTOs use (create checkout, subscription checkout, settings, merchants). */
class CreateDto {
  @IsDefined({ message: `amount is required and ${AMOUNT}` })
  @IsString({ message: `amount ${AMOUNT}` })
  amount!: string;

  @IsOptional()
  @IsArray({ message: 'chains must be an array of CAIP-2 chain ids' })
  @IsString({ each: true, message: 'chains must be an array of CAIP-2 chain ids' })
  chains?: string[] | null;

  @IsOptional()
  @IsInt({ message: 'expires_in must be an integer number of seconds' })
  expires_in?: number | null;

  @IsOptional()
  @IsObject({ message: 'metadata must be an object of string values' })
  metadata?: Record<string, unknown> | null;
}

class ProfileDto {
  @ValidateIf((_o, v) => v !== undefined)
  @IsString()
  @Length(1, 100)
  display_name?: string;

  @ValidateIf((_o, v) => v !== null && v !== undefined)
  @IsArray()
  @ArrayMaxSize(3)
  @IsString({ each: true })
  event_types?: string[] | null;

  @IsOptional()
  @IsBoolean()
  acknowledge?: boolean;
}

class MerchantDto {
  @IsString()
  @Matches(/^[a-z]+$/, { message: 'name must be lowercase letters' })
  name!: string;

  @IsIn(['test', 'live'])
  mode!: 'test' | 'live';

  @Allow()
  note?: unknown;
}

class Inner {
  @IsString()
  label!: string;
}

/** Nested validation is not compiled: the reference runs it. */
class NestedDto {
  @ValidateNested()
  @Type(() => Inner)
  inner!: Inner;
}

const bodies: Record<string, unknown[]> = {
  CreateDto: [
    { amount: '5' },
    { amount: '5', chains: ['eip155:1'], expires_in: 60, metadata: { a: 'b' } },
    { amount: '5', chains: null, expires_in: null, metadata: null },
    {},
    { amount: null },
    { amount: 5 },
    { amount: '5', chains: 'eip155:1' },
    { amount: '5', chains: ['eip155:1', 2] },
    { amount: '5', chains: 5 },
    { amount: '5', chains: [] },
    { amount: '5', expires_in: 1.5 },
    { amount: '5', expires_in: '60' },
    { amount: '5', metadata: [] },
    { amount: '5', metadata: 'x' },
    { amount: '5', colour: 'red' },
    { colour: 'red', amount: 5, size: 1 },
    { expires_in: 'x', amount: 5 },
    undefined,
    null,
  ],
  ProfileDto: [
    {},
    { display_name: 'Acme' },
    { display_name: '' },
    { display_name: 'x'.repeat(101) },
    { display_name: null },
    { display_name: 5 },
    { event_types: null },
    { event_types: ['a', 'b'] },
    { event_types: ['a', 'b', 'c', 'd'] },
    { event_types: ['a', 1] },
    { event_types: 'a' },
    { acknowledge: true },
    { acknowledge: 'yes' },
    { acknowledge: null },
  ],
  MerchantDto: [
    { name: 'acme', mode: 'test' },
    { name: 'acme', mode: 'live', note: { any: ['thing'] } },
    { name: 'Acme', mode: 'test' },
    { name: 'acme', mode: 'prod' },
    { name: 5, mode: 'test' },
    { mode: 'test' },
    {},
  ],
  NestedDto: [{ inner: { label: 'x' } }, { inner: { label: 5 } }, { inner: 'x' }, {}],
};
const dtos: Record<string, new () => object> = { CreateDto, ProfileDto, MerchantDto, NestedDto };

const body = (metatype: new () => object): ArgumentMetadata => ({ type: 'body', metatype, data: undefined });

/** What a pipe makes of a body: the value (and its class) or the 400's fields. */
async function outcome(pipe: ValidationPipe, metatype: new () => object, value: unknown) {
  try {
    const result: unknown = await pipe.transform(
      value === undefined ? undefined : JSON.parse(JSON.stringify(value)),
      body(metatype),
    );
    return {
      value: JSON.parse(JSON.stringify(result)) as unknown,
      instance: result instanceof metatype,
    };
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    const { status, type, code, param, message } = error;
    return { error: { status, type, code, param, message } };
  }
}

describe('the compiled validation pipe', () => {
  const compiled = createValidationPipe();
  const reference = createReferenceValidationPipe();

  it.each(Object.keys(bodies))('answers every %s body exactly as class-validator does', async (name) => {
    const metatype = dtos[name] as new () => object;
    const validate = jest.spyOn(
      ValidationPipe.prototype as unknown as { validate: () => unknown },
      'validate',
    );
    try {
      for (const value of bodies[name] ?? []) {
        const expected = await outcome(reference, metatype, value);
        validate.mockClear();
        await expect(outcome(compiled, metatype, value)).resolves.toEqual(expected);
        // Compiled, a valid body never reaches class-validator; the nested DTO is not compiled.
        if ('value' in expected) expect(validate).toHaveBeenCalledTimes(name === 'NestedDto' ? 1 : 0);
      }
    } finally {
      validate.mockRestore();
    }
  });

  it('answers bodies that are not objects as class-validator does', async () => {
    for (const value of [[], [1, 2], [{ amount: '5' }], 'abc', 5, true]) {
      const expected = await outcome(reference, CreateDto, value);
      await expect(outcome(compiled, CreateDto, value)).resolves.toEqual(expected);
    }
  });

  it('runs no class-validator on a body the compiled rules decide (valid, or refused for an unknown field)', async () => {
    const validate = jest.spyOn(
      ValidationPipe.prototype as unknown as { validate: () => unknown },
      'validate',
    );
    try {
      const pipe = createValidationPipe();
      await pipe.transform({ amount: '5', chains: ['a'] }, body(CreateDto));
      await pipe.transform({ display_name: 'Acme', event_types: null }, body(ProfileDto));
      await expect(pipe.transform({ amount: '5', size: 1 }, body(CreateDto))).rejects.toMatchObject({
        param: 'size',
      });
      expect(validate).not.toHaveBeenCalled();
      // A failing check is reported by class-validator itself (its param and message).
      await expect(pipe.transform({ amount: 5 }, body(CreateDto))).rejects.toMatchObject({ param: 'amount' });
      expect(validate).toHaveBeenCalledTimes(1);
    } finally {
      validate.mockRestore();
    }
  });

  it('answers an unknown field as an unknown query parameter, on both paths: code unknown_parameter, first one named, what the DTO takes listed', async () => {
    const expected = {
      error: {
        status: 400,
        type: 'validation_error',
        code: 'unknown_parameter',
        param: 'colour',
        message:
          'Received unknown parameter: colour (this request takes amount, chains, expires_in, metadata).',
      },
    };
    for (const pipe of [reference, compiled])
      await expect(outcome(pipe, CreateDto, { colour: 'red', amount: 5, size: 1 })).resolves.toEqual(
        expected,
      );
    // Not compiled (class-validator's path), the same words.
    await expect(outcome(compiled, NestedDto, { inner: { label: 'x' }, colour: 'red' })).resolves.toEqual({
      error: {
        ...expected.error,
        message: 'Received unknown parameter: colour (this request takes inner).',
      },
    });
    // Nested: Stripe's bracketed path, as the other params are named (what the request takes is its top level).
    await expect(outcome(reference, NestedDto, { inner: { label: 'x', lable: 'y' } })).resolves.toEqual({
      error: {
        ...expected.error,
        param: 'inner[lable]',
        message: 'Received unknown parameter: inner[lable].',
      },
    });
  });

  it('refuses a field named like an Object method as unknown (class-transformer dropped it silently)', async () => {
    for (const key of ['toString', 'hasOwnProperty', 'valueOf']) {
      await expect(outcome(compiled, CreateDto, { amount: '5', [key]: 'x' })).resolves.toEqual({
        error: {
          status: 400,
          type: 'validation_error',
          code: 'unknown_parameter',
          param: key,
          message: `Received unknown parameter: ${key} (this request takes amount, chains, expires_in, metadata).`,
        },
      });
    }
  });

  it('leaves routes without a DTO class as they were (a plain object body, params and queries)', async () => {
    const value = { anything: ['goes'] };
    await expect(compiled.transform(value, { type: 'body', metatype: Object })).resolves.toBe(value);
    await expect(compiled.transform('42', { type: 'param', metatype: Number, data: 'n' })).resolves.toBe(42);
  });
});
