import { ArgumentsHost, Catch, Logger, type RpcExceptionFilter } from '@nestjs/common';
import { type Observable, throwError } from 'rxjs';
import { DomainError, type DomainErrorShape } from '@stablepay/util';

/** What a command's failure looks like on the wire, whatever the transport (TCP JSON, Kafka header, in-process). */
export interface RemoteErrorPayload {
  readonly domainError?: DomainErrorShape;
  readonly message: string;
}

/**
 * Installed on the command server: a DomainError crosses the transport whole (type, status, code, param,
 * message), so the gateway answers exactly what the owner decided; anything else is logged where it happened and
 * crosses as an opaque internal error.
 */
@Catch()
export class CommandErrorFilter implements RpcExceptionFilter {
  private readonly logger = new Logger('commands');

  catch(exception: unknown, _host: ArgumentsHost): Observable<never> {
    if (exception instanceof DomainError) {
      const payload: RemoteErrorPayload = { domainError: exception.toJSON(), message: exception.message };
      return throwError(() => payload);
    }
    this.logger.error(exception instanceof Error ? exception : String(exception));
    const payload: RemoteErrorPayload = { message: 'the owning service failed to handle the command' };
    return throwError(() => payload);
  }
}

/** Thrown on the caller's side when the owner failed for a reason that is not a domain decision. */
export class RemoteCommandError extends Error {
  constructor(
    readonly pattern: string,
    message: string,
  ) {
    super(`command ${pattern}: ${message}`);
    this.name = 'RemoteCommandError';
  }
}

/** Turns what the transport delivered back into the error the owner threw (Kafka gives a Buffer of JSON). */
export function reviveRemoteError(pattern: string, err: unknown): Error {
  let value: unknown = err;
  if (Buffer.isBuffer(value)) value = value.toString('utf8');
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value);
    } catch {
      return new RemoteCommandError(pattern, value as string);
    }
  }
  if (typeof value === 'object' && value !== null) {
    const payload = value as Partial<RemoteErrorPayload>;
    if (DomainError.isShape(payload.domainError)) return new DomainError(payload.domainError);
    if (typeof payload.message === 'string') return new RemoteCommandError(pattern, payload.message);
  }
  return new RemoteCommandError(pattern, String(value));
}
