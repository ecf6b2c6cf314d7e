import { nestedParam, validationError } from '@stablepay/util';

/**
 * PATCH /settings `webhook_event_types`: null selects every type; a list must name types from the webhook event
 * catalogue (passed in by the composition root as `MerchantsConfig.webhookEventCatalogue`, owned by the webhooks
 * scope). Duplicates are dropped, order kept. Without a catalogue the list is stored as given.
 */
export function requireKnownEventTypes(
  types: string[] | null,
  catalogue: readonly string[] | undefined,
): string[] | null {
  if (types === null) return null;
  if (catalogue !== undefined) {
    const known = new Set(catalogue);
    types.forEach((type, i) => {
      if (!known.has(type)) {
        throw validationError(
          nestedParam('webhook_event_types', i),
          `${nestedParam('webhook_event_types', i)}: '${type}' is not a webhook event type.`,
        );
      }
    });
  }
  return [...new Set(types)];
}
