import { ConfigError, JsonLogger } from '@stablepay/util';

/**
 * Entry point wrapper for every app: a configuration error stops the process with one clear log line naming the
 * variable (exit 78, EX_CONFIG); any other start-up failure exits 1. Shutdown on SIGTERM/SIGINT is handled by
 * Nest's shutdown hooks (enabled in createHttpApp): in-flight requests finish, consumers stop, pools close.
 */
export function runMain(service: string, main: () => Promise<{ url: string }>): void {
  const logger = new JsonLogger(service);
  main().then(
    ({ url }) => logger.log({ msg: `${service} listening`, url }),
    (error: unknown) => {
      if (error instanceof ConfigError || (error instanceof Error && /environment variable/.test(error.message))) {
        logger.fatal({ msg: 'invalid configuration', error: error.message });
        process.exit(78);
      }
      logger.fatal(error instanceof Error ? error : new Error(String(error)));
      process.exit(1);
    },
  );
}
