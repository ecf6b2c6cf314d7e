import { ConfigError, JsonLogger } from '@stablepay/util';

/**
 * Entry point wrapper for every app: a configuration error stops the process with one clear log line naming the
 * variable (exit 78, EX_CONFIG); any other start-up failure exits 1. SIGTERM/SIGINT close the app (not ready at
 * once, in-flight requests finish, consumers stop, pools close) and exit 0, so orchestrators see a clean stop.
 */
export function runMain(
  service: string,
  main: () => Promise<{ url: string; stopDeadlineMs: number; stop(): Promise<void> }>,
): void {
  const logger = new JsonLogger(service);
  Promise.resolve()
    .then(main)
    .then(
      (running) => {
        logger.log({ msg: `${service} listening`, url: running.url });
        let stopping = false;
        const shutdown = (signal: NodeJS.Signals) => {
          if (stopping) return;
          stopping = true;
          logger.log({ msg: `${service} shutting down`, signal });
          // Past the shutdown delay, the longest request the HTTP deadline allows and a margin, nothing we
          // accepted is still running: exit anyway, before the orchestrator's grace period ends in a SIGKILL.
          const force = setTimeout(() => {
            logger.error({ msg: `${service} did not stop within ${running.stopDeadlineMs} ms; exiting` });
            process.exit(1);
          }, running.stopDeadlineMs);
          force.unref();
          running.stop().then(
            () => process.exit(0),
            (error: unknown) => {
              logger.error(error instanceof Error ? error : new Error(String(error)));
              process.exit(1);
            },
          );
        };
        process.on('SIGTERM', shutdown);
        process.on('SIGINT', shutdown);
      },
      (error: unknown) => {
        if (
          error instanceof ConfigError ||
          (error instanceof Error && /environment variable/.test(error.message))
        ) {
          logger.fatal({ msg: 'invalid configuration', error: error.message });
          process.exit(78);
        }
        logger.fatal(error instanceof Error ? error : new Error(String(error)));
        process.exit(1);
      },
    );
}
