/** The WebhookSourceRegistry of this process (composition roots pass the sources to webhookDispatchService). */
export const WEBHOOK_SOURCES = Symbol('WEBHOOK_SOURCES');
