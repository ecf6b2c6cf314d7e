import { Counter, Gauge, Histogram, register, type Metric } from 'prom-client';
import { stuckProjectionLags } from '../supervision/consumer-health';

/**
 * Prometheus metrics of the projection runners, on prom-client's default registry (served by `/metrics`).
 * Get-or-create: several Nest applications in one process (tests, the embedded run) share the registry.
 */
function metric<M extends Metric>(name: string, create: () => M): M {
  return (register.getSingleMetric(name) as M | undefined) ?? create();
}

export const projectionMetrics = {
  lag: metric(
    'stablepay_projection_lag_seconds',
    () =>
      new Histogram({
        name: 'stablepay_projection_lag_seconds',
        help: 'Time from an event being stored to its projection committing, per projection.',
        labelNames: ['projection'],
        buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      }),
  ),
  lastLag: metric(
    'stablepay_projection_last_lag_seconds',
    () =>
      new Gauge({
        name: 'stablepay_projection_last_lag_seconds',
        help: 'Lag of the newest event a projection committed; while it is stuck, the age of its oldest pending event.',
        labelNames: ['projection'],
        // Set at each commit; a stuck projection commits nothing, so without this the gauge would freeze.
        collect() {
          for (const { projection, lagSeconds } of stuckProjectionLags())
            this.set({ projection }, lagSeconds);
        },
      }),
  ),
  batchSize: metric(
    'stablepay_projection_batch_size',
    () =>
      new Histogram({
        name: 'stablepay_projection_batch_size',
        help: 'Events per batch a projection applied in one transaction.',
        labelNames: ['projection'],
        buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500],
      }),
  ),
  events: metric(
    'stablepay_projection_events_total',
    () =>
      new Counter({
        name: 'stablepay_projection_events_total',
        help: 'Events a projection handled, by outcome (applied, parked, waiting behind a parked event).',
        labelNames: ['projection', 'outcome'],
      }),
  ),
  failures: metric(
    'stablepay_projection_batch_failures_total',
    () =>
      new Counter({
        name: 'stablepay_projection_batch_failures_total',
        help: 'Batches that failed for a reason other than one event (database unavailable...), then retried.',
        labelNames: ['projection'],
      }),
  ),
  parked: metric(
    'stablepay_projection_parked_streams',
    () =>
      new Gauge({
        name: 'stablepay_projection_parked_streams',
        help: "Streams a projection parked on an event it could not apply, waiting for an operator retry. The projection's total in the shared table, reported alike by each process running it: aggregate with max by (projection), not sum.",
        labelNames: ['projection'],
      }),
  ),
};
