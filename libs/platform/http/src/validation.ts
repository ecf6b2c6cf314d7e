import { type ArgumentMetadata, ValidationPipe, type ValidationError } from '@nestjs/common';
import {
  getMetadataStorage,
  type ValidationArguments,
  ValidationTypes,
  type ValidatorConstraintInterface,
} from 'class-validator';
import { invalidRequest, nestedParam, takesFields, unknownParameter, validationError } from '@stablepay/util';

type Dto = new () => Record<string, unknown>;

// The arguments class-validator's executor passes for this pipe's options (no groups, no `always`).
const dtoMetadatas = (metatype: Dto) =>
  getMetadataStorage().getTargetValidationMetadatas(
    metatype,
    undefined as unknown as string,
    false,
    false,
    undefined,
  );

/** The fields a DTO takes (those with any rule: the whitelist), in declaration order. */
const dtoFields = (metatype: Dto): string[] =>
  Object.keys(getMetadataStorage().groupByPropertyName(dtoMetadatas(metatype)));

/**
 * The first failing constraint, with its param path in Stripe's form (`metadata[plan_name]`, `supported_chains[1]`). An unknown
 * field (the whitelist) carries code unknown_parameter, as an unknown query parameter and every hand-written body
 * check answer it; a top-level one also says what the route takes, read from the DTO of the instance that failed.
 */
export function firstValidationFailure(
  errors: readonly ValidationError[],
  prefix = '',
): { param: string; message: string; code?: string } {
  for (const error of errors) {
    const param = prefix ? nestedParam(prefix, error.property) : error.property;
    if (error.constraints) {
      const [key, message] = Object.entries(error.constraints)[0] ?? ['', 'is invalid'];
      if (key === 'whitelistValidation') {
        const dto = prefix === '' ? (error.target?.constructor as Dto | undefined) : undefined;
        const { message, code } = unknownParameter(param, dto && takesFields(dtoFields(dto)));
        return { param, message, ...(code ? { code } : {}) };
      }
      return {
        param,
        message: message.startsWith(error.property)
          ? message.replace(error.property, param)
          : `${param}: ${message}`,
        // Absent (or null, as fieldFault reads it), whichever rule said so; else validationError's default.
        ...(error.target && (error.target as Record<string, unknown>)[error.property] == null
          ? { code: 'parameter_missing' }
          : {}),
      };
    }
    if (error.children && error.children.length > 0) return firstValidationFailure(error.children, param);
  }
  return { param: prefix || 'body', message: 'The request is invalid.' };
}

const PIPE_OPTIONS = {
  whitelist: true,
  forbidNonWhitelisted: true,
  transform: true,
  transformOptions: { enableImplicitConversion: false },
  // The target (the DTO instance) names the class whose fields an unknown_parameter lists; never sent.
  validationError: { target: true, value: false },
  exceptionFactory: (errors: ValidationError[]) => {
    const { param, message, code } = firstValidationFailure(errors);
    return validationError(param, message, code);
  },
};

/** One decorator's check of one property: true when it passes (or does not apply). */
type Check = (entity: Record<string, unknown>, value: unknown) => boolean;

interface CompiledDto {
  /** The properties with any rule (the whitelist). */
  readonly known: ReadonlySet<string>;
  /** What an unknown field's message says the route takes (takesFields of them). */
  readonly takes: string;
  /** Per property, in class-validator's order: its conditions (all true to validate) and its checks. */
  readonly properties: ReadonlyArray<{
    readonly name: string;
    readonly conditions: ReadonlyArray<(entity: object, value: unknown) => boolean>;
    readonly checks: readonly Check[];
  }>;
}

/** A check's answer that is not a plain yes or no (an async constraint): the compiled path cannot decide. */
class Undecided extends Error {}

/**
 * A DTO's class-validator rules as plain checks, built once: the rules, their order and the constraints' own
 * `validate` functions are class-validator's, read from its metadata storage as its executor reads them on every
 * call. Undefined when the class uses anything beyond sync decorators, `@IsOptional`/`@ValidateIf`, `@IsDefined`
 * and `@Allow` (nested or promise validation, async constraints): such a DTO goes through class-validator.
 */
function compileDto(metatype: Dto): CompiledDto | undefined {
  const storage = getMetadataStorage();
  const metadatas = dtoMetadatas(metatype);
  if (metadatas.length === 0) return undefined;
  const supported = [
    ValidationTypes.CUSTOM_VALIDATION,
    ValidationTypes.IS_DEFINED,
    ValidationTypes.CONDITIONAL_VALIDATION,
    ValidationTypes.WHITELIST,
  ];
  if (metadatas.some((m) => !supported.includes(m.type))) return undefined;
  const grouped = storage.groupByPropertyName(metadatas);
  const properties: Array<CompiledDto['properties'][number]> = [];
  for (const [name, rules] of Object.entries(grouped)) {
    const conditions = rules
      .filter((m) => m.type === ValidationTypes.CONDITIONAL_VALIDATION)
      .map((m) => m.constraints[0] as (entity: object, value: unknown) => boolean);
    // IS_DEFINED first, then the other checks in registration order, as the executor runs them.
    const ordered = [
      ...rules.filter((m) => m.type === ValidationTypes.IS_DEFINED),
      ...rules.filter((m) => m.type === ValidationTypes.CUSTOM_VALIDATION),
    ];
    const checks: Check[] = [];
    const targetName = metatype.name;
    for (const rule of ordered) {
      const constraints = storage.getTargetValidatorConstraints(rule.constraintCls);
      if (constraints.some((c) => c.async)) return undefined;
      const validators = constraints.map((c) => c.instance as ValidatorConstraintInterface);
      const passes = (value: unknown, args: ValidationArguments): boolean => {
        for (const validator of validators) {
          const ok: unknown = validator.validate(value, args);
          if (ok instanceof Promise) throw new Undecided();
          if (!ok) return false;
        }
        return true;
      };
      checks.push((entity, value) => {
        if (rule.validateIf && !rule.validateIf(entity, value)) return true;
        const args: ValidationArguments = {
          targetName,
          property: name,
          object: entity,
          value,
          constraints: rule.constraints,
        };
        if (!rule.each || !Array.isArray(value)) {
          if (rule.each && (value instanceof Set || value instanceof Map)) throw new Undecided();
          return passes(value, args);
        }
        return value.every((item) => passes(item, args));
      });
    }
    properties.push({ name, conditions, checks });
  }
  const known = Object.keys(grouped);
  return { known: new Set(known), takes: takesFields(known), properties };
}

function passesAll(dto: CompiledDto, entity: Record<string, unknown>): boolean {
  for (const { name, conditions, checks } of dto.properties) {
    const value = entity[name];
    if (!conditions.every((condition) => condition(entity, value))) continue;
    for (const check of checks) if (!check(entity, value)) return false;
  }
  return true;
}

/** A JSON object (its prototype is an Object.prototype, of whichever realm parsed it, or null). */
const isPlainObject = (value: unknown): value is Record<string, unknown> => {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value) as object | null;
  return prototype === null || Object.getPrototypeOf(prototype) === null;
};

/**
 * Nest's ValidationPipe with each DTO's rules compiled once (compileDto) for the bodies every request sends: a JSON
 * object. class-validator's executor looks the rules up among every loaded DTO's metadata, groups them, and builds
 * an error object per property on every call, and class-transformer copies the body by reflection: ~15 us a call,
 * several times that inside a busy server (docs/benchmarks.md, 2026-11-23). The compiled path refuses unknown
 * fields first, as the whitelist does, then runs the same checks on the same instance; on a failure it hands the
 * body to ValidationPipe itself, so the 400 (its param and message) is class-validator's. Anything else (a
 * primitive or an array as the body, a DTO it cannot compile) goes to ValidationPipe as before.
 *
 * One deliberate difference: a field named like an Object method (`toString`, `hasOwnProperty`) is refused as
 * unknown, as every other unknown field is; class-transformer silently dropped it. Nested values are passed on as
 * parsed (parseJsonBody has refused prototype keys at every depth), not copied.
 */
export class CompiledValidationPipe extends ValidationPipe {
  private readonly compiled = new Map<unknown, CompiledDto | null>();

  constructor() {
    super(PIPE_OPTIONS);
  }

  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    const metatype = metadata.metatype as Dto | undefined;
    if (!metatype || metadata.type === 'custom') return super.transform(value, metadata);
    let dto = this.compiled.get(metatype);
    if (dto === undefined) {
      // Built-in types (String, Number, Object...) are not validated, only converted: never compiled.
      dto = (this.toValidate(metadata) && compileDto(metatype)) || null;
      this.compiled.set(metatype, dto);
    }
    const body = value ?? {};
    if (dto === null || !isPlainObject(body)) return super.transform(value, metadata);
    const keys = Object.keys(body);
    for (const key of keys) if (!dto.known.has(key)) throw unknownParameter(key, dto.takes);
    const entity = new metatype();
    for (const key of keys) entity[key] = body[key];
    try {
      if (passesAll(dto, entity)) return entity;
    } catch (error) {
      if (!(error instanceof Undecided)) throw error;
    }
    return super.transform(value, metadata);
  }
}

/**
 * class-validator DTOs, with unknown fields refused (as Stripe does) and failures turned into
 * 400 validation_error with the offending `param`; each DTO's rules compiled once (CompiledValidationPipe).
 */
export function createValidationPipe(): ValidationPipe {
  return new CompiledValidationPipe();
}

/** The same pipe without the compiled path: class-validator and class-transformer on every call (the reference). */
export function createReferenceValidationPipe(): ValidationPipe {
  return new ValidationPipe(PIPE_OPTIONS);
}

/**
 * The body check of every route that takes no parameters (cancel, rotate, test, redeliver): nothing, or `{}`.
 * Anything else is a client mistake (a field it thinks matters), refused before the action runs rather than ignored.
 */
export function requireNoParameters(body: unknown): void {
  if (body === undefined || body === null) return;
  if (typeof body !== 'object' || Array.isArray(body))
    throw invalidRequest('This request takes no parameters: send no body or {}.', 'invalid_json');
  const [unknown] = Object.keys(body);
  if (unknown !== undefined) throw unknownParameter(unknown, takesFields([]));
}
