import type { JsonLogger } from './json-logger';

/**
 * Runs a start-time repair of a read model: what it rewrote is logged; a failure (the event store unreachable) is
 * logged and the process starts anyway, as it would have before the repair existed: the repair is re-runnable and
 * runs again at the next start.
 */
export async function runStartupRepair(
  logger: Pick<JsonLogger, 'log' | 'error'>,
  repair: () => Promise<readonly string[]>,
  messages: { readonly repaired: string; readonly failed: string },
): Promise<void> {
  try {
    const repaired = await repair();
    if (repaired.length > 0) logger.log({ msg: messages.repaired, repaired });
  } catch (error) {
    logger.error({ msg: messages.failed, error: error instanceof Error ? error.message : String(error) });
  }
}
