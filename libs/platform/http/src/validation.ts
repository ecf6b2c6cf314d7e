import { ValidationPipe, type ValidationError } from '@nestjs/common';
import { invalidRequest, validationError } from '@stablepay/util';

/** The first failing constraint, with a dotted param path (`metadata.plan_name`, `supported_chains.1`). */
export function firstValidationFailure(
  errors: readonly ValidationError[],
  prefix = '',
): { param: string; message: string } {
  for (const error of errors) {
    const param = prefix ? `${prefix}.${error.property}` : error.property;
    if (error.constraints) {
      const [key, message] = Object.entries(error.constraints)[0] ?? ['', 'is invalid'];
      if (key === 'whitelistValidation') return { param, message: `Received unknown parameter: ${param}` };
      return {
        param,
        message: message.startsWith(error.property)
          ? message.replace(error.property, param)
          : `${param}: ${message}`,
      };
    }
    if (error.children && error.children.length > 0) return firstValidationFailure(error.children, param);
  }
  return { param: prefix || 'body', message: 'The request is invalid.' };
}

/**
 * class-validator DTOs, with unknown fields refused (as Stripe does) and failures turned into
 * 400 validation_error with the offending `param`.
 */
export function createValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    transform: true,
    transformOptions: { enableImplicitConversion: false },
    validationError: { target: false, value: false },
    exceptionFactory: (errors: ValidationError[]) => {
      const { param, message } = firstValidationFailure(errors);
      return validationError(param, message);
    },
  });
}

/**
 * For a POST that takes no parameters: nothing, or `{}`. Anything else is a client mistake (a field it thinks
 * matters), refused before the action runs rather than ignored.
 */
export function requireNoParameters(body: unknown): void {
  if (body === undefined || body === null) return;
  if (typeof body !== 'object' || Array.isArray(body))
    throw invalidRequest('This request takes no parameters: send no body or {}.');
  const [unknown] = Object.keys(body);
  if (unknown !== undefined) throw validationError(unknown, `Received unknown parameter: ${unknown}`);
}
