import { signWebhookPayload } from '@stablepay/merchant-sdk';
import type { ActiveWebhookSecrets } from '@stablepay/merchants-service';
import {
  buildEnvelope,
  serializeEnvelope,
  serializeRecordedEnvelope,
  type WebhookEventRecord,
} from '@stablepay/webhooks-domain';

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
  return signed(event.id, serializeEnvelope(buildEnvelope(event, options)), secrets, at);
}

/**
 * A recorded event's delivery from its `data` as the database keeps it (jsonb text): the dispatcher's path, which
 * neither parses nor re-serialises the data (`serializeRecordedEnvelope`); signed the same way.
 */
export function prepareRecordedDelivery(
  event: Pick<WebhookEventRecord, 'id' | 'type' | 'createdAt'>,
  dataJson: string,
  secrets: ActiveWebhookSecrets,
  at: Date,
): PreparedDelivery {
  return signed(event.id, serializeRecordedEnvelope(event, dataJson), secrets, at);
}

function signed(id: string, body: Buffer, secrets: ActiveWebhookSecrets, at: Date): PreparedDelivery {
  const signatures = signWebhookPayload(body, secrets.current, {
    id,
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
