/**
 * JSON requests to the API server without @kubernetes/client-node's typed (de)serialisation.
 *
 * `KubernetesObjectApi.patch` and `.list` pass built-in kinds through the client's generated models,
 * which rename fields that are reserved words in TypeScript: a NetworkPolicy rule's `from` is the
 * model's `_from`, so a plain object's `from` is silently dropped on the way out (the policy would then
 * admit every source) and comes back as `_from` on the way in. The controller sends and reads objects
 * exactly as rendered, so its applies, lists and deletes go through here as plain JSON.
 */
import http from 'node:http';
import https from 'node:https';
import type * as k8s from '@kubernetes/client-node';

/** An API error as client-node reports one: `code` is the HTTP status; `body` the Status object. */
export class ApiError extends Error {
  constructor(
    readonly code: number,
    readonly body: unknown,
    message: string,
  ) {
    super(message);
  }
}

export interface RawRequest {
  method: 'GET' | 'PATCH' | 'DELETE' | 'POST';
  path: string;
  query?: Record<string, string | undefined>;
  body?: unknown;
  contentType?: string;
  timeoutMs?: number;
}

/** The collection path of a kind: `/api/v1/namespaces/ns/configmaps` or `/apis/g/v/plural`. */
export function collectionPath(apiVersion: string, plural: string, namespace?: string): string {
  const base = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  return namespace ? `${base}/namespaces/${encodeURIComponent(namespace)}/${plural}` : `${base}/${plural}`;
}

export async function requestJson<T = unknown>(kc: k8s.KubeConfig, r: RawRequest): Promise<T> {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error('no current cluster in the kubeconfig');
  const url = new URL(r.path, server);
  for (const [k, v] of Object.entries(r.query ?? {})) if (v !== undefined) url.searchParams.set(k, v);
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  const payload = r.body === undefined ? undefined : JSON.stringify(r.body);
  const mod = url.protocol === 'https:' ? https : http;
  return new Promise<T>((resolve, reject) => {
    const req = mod.request(
      url,
      {
        ...opts,
        method: r.method,
        headers: {
          ...(opts.headers ?? {}),
          accept: 'application/json',
          ...(payload !== undefined
            ? {
                'content-type': r.contentType ?? 'application/json',
                'content-length': Buffer.byteLength(payload),
              }
            : {}),
        },
        timeout: r.timeoutMs ?? 30_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown;
          try {
            body = text ? JSON.parse(text) : undefined;
          } catch {
            body = undefined;
          }
          const code = res.statusCode ?? 0;
          if (code >= 200 && code < 300) return resolve(body as T);
          // The Status reason and the API server's message name the object and the cause; they carry
          // no object content.
          const status = body as { reason?: string; message?: string } | undefined;
          reject(
            new ApiError(
              code,
              body,
              `HTTP ${code}${status?.reason ? ` ${status.reason}` : ''}${status?.message ? `: ${status.message}` : ''}`,
            ),
          );
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${r.method} ${url.pathname}: timeout`)));
    req.on('error', reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}
