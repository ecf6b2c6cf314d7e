/**
 * The value of one series in a Prometheus exposition text (prom-client's `register.metrics()`, a /metrics body), 0
 * when it is absent. Labels in the order prom-client writes them (as declared).
 */
export function metricValue(
  text: string,
  name: string,
  labels: Readonly<Record<string, string>> = {},
): number {
  const wanted = Object.entries(labels).map(([label, value]) => `${label}="${value}"`);
  const series = wanted.length > 0 ? `${name}{${wanted.join(',')}} ` : `${name} `;
  const line = text.split('\n').find((l) => l.startsWith(series));
  return line === undefined ? 0 : Number(line.slice(series.length));
}
