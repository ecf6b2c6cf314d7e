import { request } from 'node:http';

/**
 * An HTTP request with its headers exactly as listed, a repeated one sent as many times as it is listed: fetch joins
 * a repeated header into one line, so a test of what a server does with duplicates needs this. `headers` alternates
 * names and values, as Node's `rawHeaders`; the body, when given, is sent as JSON.
 */
export function requestWithRawHeaders(
  url: string,
  method: string,
  headers: readonly string[],
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const target = new URL(url);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const all = ['Host', target.host, ...headers];
  if (payload !== undefined)
    all.push('Content-Type', 'application/json', 'Content-Length', String(Buffer.byteLength(payload)));
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: target.hostname,
        port: target.port,
        path: `${target.pathname}${target.search}`,
        method,
        headers: all,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}
