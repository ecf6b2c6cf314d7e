import { MessagePattern } from '@nestjs/microservices';

/**
 * Marks the method that handles one command pattern in the owning service (`@MessagePattern` under our name:
 * the transport is configuration, see connectCommandServer). The method receives the JSON payload and returns a
 * JSON answer; a DomainError it throws reaches the caller unchanged.
 */
export const CommandHandler = (pattern: string): MethodDecorator => MessagePattern(pattern);
