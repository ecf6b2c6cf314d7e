import { signWebhookPayload } from '@stablepay/merchant-sdk';
import type { ActiveWebhookSecrets } from '@stablepay/merchants-service';
import { buildEnvelope, serializeEnvelope, type WebhookEventRecord } from '@stablepay/webhooks-domain';

export const WEBHOOK_USER_AGENT = 'Stablepay-Webhooks/1.0';

export interface PreparedDelivery {
  readonly body: Buffer;
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * SPEC Events > Envelope and headers, plus Standard Webhooks: the body is serialised once and those exact bytes
 * are signed and sent. Signing is the merchant SDK's `signWebhookPayload` (one implementation for the signer and
 * the SDK's `verifyWebhook`): `X-Webhook-Id`, `X-Signature` (hex HMAC-SHA256 with the current secret as issued,
 * `whsec_` included), `X-Signature-Previous` inside a rotation window, and `webhook-id`, `webhook-timestamp`,
 * `webhook-signature` (`v1,<base64>` over `{id}.{timestamp}.{body}`, one entry per valid secret).
 */
export function prepareDelivery(
  event: WebhookEventRecord,
  secrets: ActiveWebhookSecrets,
  at: Date,
  options: { readonly testDelivery?: boolean } = {},
): PreparedDelivery {
  const body = serializeEnvelope(buildEnvelope(event, options));
  const signatures = signWebhookPayload(body, secrets.current, {
    id: event.id,
    timestamp: at,
    ...(secrets.previous !== undefined ? { previousSecret: secrets.previous } : {}),
  });
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'user-agent': WEBHOOK_USER_AGENT,
      ...signatures,
    },
  };
}
