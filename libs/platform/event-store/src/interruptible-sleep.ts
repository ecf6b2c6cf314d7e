/**
 * A sleep that can be cut short: pollers sleep on it between reads and are woken early by a new append or a
 * stop request, so stopping never waits for a poll interval or a retry back-off to run out.
 */
export class InterruptibleSleep {
  private readonly sleepers = new Set<() => void>();
  private pendingWake = false;

  sleep(ms: number): Promise<void> {
    if (this.pendingWake) {
      this.pendingWake = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const end = (): void => {
        clearTimeout(timer);
        this.sleepers.delete(end);
        resolve();
      };
      const timer = setTimeout(end, ms);
      this.sleepers.add(end);
    });
  }

  /** Ends every current sleep now, or makes the next one return at once if nobody sleeps. */
  wake(): void {
    if (this.sleepers.size === 0) {
      this.pendingWake = true;
      return;
    }
    for (const end of [...this.sleepers]) end();
  }
}

export interface BackoffSettings {
  readonly initialMs: number;
  readonly maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffSettings = { initialMs: 50, maxMs: 5_000 };

/** Exponential back-off: initial, 2x, 4x ... capped. `attempt` counts from 0. */
export function backoffDelay(settings: BackoffSettings, attempt: number): number {
  return Math.min(settings.maxMs, settings.initialMs * 2 ** Math.min(attempt, 30));
}
