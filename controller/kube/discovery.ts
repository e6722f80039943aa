/**
 * Reads the upstream facts controller/upstream.ts judges: API discovery (`/apis`, `/apis/<g>/<v>`) for
 * kagent.dev and agentgateway.dev, and the OpenAPI v3 document of kagent.dev/v1alpha2 for the Agent
 * schema. All are non-resource URLs every authenticated user may read (ClusterRole system:discovery),
 * so they need no RBAC of their own.
 */
import http from 'node:http';
import https from 'node:https';
import type * as k8s from '@kubernetes/client-node';
import { AGENTGATEWAY, KAGENT, type UpstreamFacts } from '../upstream.ts';

interface Discovery {
  groups?: { name: string; versions: { version: string }[] }[];
  resources?: { name: string }[];
  components?: { schemas?: Record<string, Record<string, unknown>> };
}

async function getJson(kc: k8s.KubeConfig, path: string): Promise<{ status: number; body: Discovery | undefined }> {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error('no current cluster in the kubeconfig');
  const url = new URL(path, server);
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  const mod = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.request(
      url,
      {
        ...opts,
        method: 'GET',
        headers: { ...(opts.headers ?? {}), accept: 'application/json' },
        timeout: 10_000,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => {
          try {
            resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined });
          } catch {
            reject(new Error(`GET ${path}: HTTP ${res.statusCode} with a body that is not JSON`));
          }
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`GET ${path}: timeout`)));
    req.on('error', reject);
    req.end();
  });
}

export async function readUpstream(kc: k8s.KubeConfig): Promise<UpstreamFacts> {
  const groups: UpstreamFacts['groups'] = {};
  const list = await getJson(kc, '/apis');
  if (list.status !== 200) throw new Error(`GET /apis: HTTP ${list.status}`);
  for (const g of list.body?.groups ?? []) {
    if (g.name !== KAGENT && g.name !== AGENTGATEWAY) continue;
    groups[g.name] = [];
    for (const v of g.versions) {
      const r = await getJson(kc, `/apis/${g.name}/${v.version}`);
      if (r.status !== 200) throw new Error(`GET /apis/${g.name}/${v.version}: HTTP ${r.status}`);
      const resources = (r.body?.resources ?? []).map((x) => x.name);
      groups[g.name]?.push({ version: v.version, resources });
    }
  }
  const facts: UpstreamFacts = { groups };
  if (groups[KAGENT]?.some((v) => v.version === 'v1alpha2')) {
    const doc = await getJson(kc, `/openapi/v3/apis/${KAGENT}/v1alpha2`);
    if (doc.status === 200) {
      const schemas = doc.body?.components?.schemas ?? {};
      const agent = Object.values(schemas).find((s) =>
        ((s['x-kubernetes-group-version-kind'] ?? []) as { group: string; kind: string }[]).some(
          (x) => x.group === KAGENT && x.kind === 'Agent',
        ),
      );
      if (agent) facts.kagentAgentSchema = agent;
    }
  }
  return facts;
}
