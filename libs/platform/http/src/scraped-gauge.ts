import { Gauge, register } from 'prom-client';

/**
 * A gauge computed at each scrape from what is live in the process (`series`: label values and value; a series not
 * yielded is absent), on prom-client's default registry served by /metrics. Get-or-create: several applications
 * in one process (tests, the embedded run) share the registry.
 */
export function scrapedGauge<L extends string>(
  name: string,
  help: string,
  labelNames: readonly L[],
  series: () => Iterable<readonly [Partial<Record<L, string>>, number]>,
): void {
  if (register.getSingleMetric(name)) return;
  new Gauge<L>({
    name,
    help,
    labelNames,
    collect() {
      this.reset();
      for (const [labels, value] of series()) this.set(labels, value);
    },
  });
}
