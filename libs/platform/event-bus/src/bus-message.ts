import { streamCategory, type EventMetadata, type RecordedEvent } from '@stablepay/event-store';
import type { BusMessage } from './event-bus.port';
import { topicForCategory } from './topics';

/**
 * The one mapping from a stored event to the envelope every adapter delivers: topic from the stream's category,
 * key = stream id (so one aggregate's events share a partition and keep their order), id = the domain event id
 * (stable across redeliveries, which is what consumers deduplicate on).
 */
export function toBusMessage(event: RecordedEvent): BusMessage {
  return {
    id: event.id,
    topic: topicForCategory(streamCategory(event.streamId)),
    key: event.streamId,
    type: event.type,
    data: event.data,
    metadata: event.metadata,
    revision: event.revision,
    recordedAt: event.recordedAt.toISOString(),
  };
}

/**
 * The envelope as JSON text. bigint values (none in the envelope itself, but a payload may carry one) are
 * written as decimal strings, the wire form the platform uses for integers that exceed 2^53.
 */
export function encodeBusMessage(message: BusMessage): string {
  return JSON.stringify(message, (_key, value: unknown) =>
    typeof value === 'bigint' ? value.toString() : value,
  );
}

export class MalformedBusMessageError extends Error {
  constructor(reason: string) {
    super(`malformed bus message: ${reason}`);
    this.name = 'MalformedBusMessageError';
  }
}

/** Parses and checks an envelope produced by encodeBusMessage. */
export function decodeBusMessage(text: string | Buffer): BusMessage {
  let parsed: unknown;
  try {
    parsed = JSON.parse(typeof text === 'string' ? text : text.toString('utf8'));
  } catch (error) {
    throw new MalformedBusMessageError(error instanceof Error ? error.message : String(error));
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new MalformedBusMessageError('not a JSON object');
  }
  const o = parsed as Record<string, unknown>;
  const text_ = (field: string): string => {
    const v = o[field];
    if (typeof v !== 'string' || v.length === 0)
      throw new MalformedBusMessageError(`'${field}' must be a string`);
    return v;
  };
  const revision = o['revision'];
  if (typeof revision !== 'number' || !Number.isInteger(revision) || revision < 0) {
    throw new MalformedBusMessageError("'revision' must be a non-negative integer");
  }
  const metadata = o['metadata'];
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) {
    throw new MalformedBusMessageError("'metadata' must be an object");
  }
  if (!('data' in o)) throw new MalformedBusMessageError("'data' is missing");
  return {
    id: text_('id'),
    topic: text_('topic'),
    key: text_('key'),
    type: text_('type'),
    data: o['data'],
    metadata: metadata as EventMetadata,
    revision,
    recordedAt: text_('recordedAt'),
  };
}
