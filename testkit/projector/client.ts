/**
 * Test-only HTTP client that sends a check request the way agentgateway v1.3.1 does: the original
 * method and path, HTTP/1.1, Host = the projector's own host:port (set by the client stack), the given
 * headers (repeated values as repeated lines), no body unless asked.
 */
import { type IncomingHttpHeaders, request } from 'node:http';
import type { CheckRequest } from '../../projector/request.ts';

export interface CheckResponse {
  status: number;
  headers: IncomingHttpHeaders;
  /** Flat [name, value, name, value, ...] as received, to count repeated response headers. */
  rawHeaders: string[];
  body: string;
}

export function sendCheck(baseUrl: string, check: CheckRequest, body?: string): Promise<CheckResponse> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, values] of Object.entries(check.headers)) {
    if (name === 'host' || values === undefined) continue;
    headers[name] = values.length === 1 ? values[0]! : [...values];
  }
  return new Promise((resolve, reject) => {
    const req = request(`${baseUrl}${check.path}`, { method: check.method, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          rawHeaders: res.rawHeaders,
          body: text,
        }),
      );
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

export function countHeader(res: CheckResponse, name: string): number {
  let n = 0;
  for (let k = 0; k < res.rawHeaders.length; k += 2) if (res.rawHeaders[k]!.toLowerCase() === name) n += 1;
  return n;
}
