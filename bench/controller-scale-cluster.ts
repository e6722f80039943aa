/**
 * The cluster of `bench:controller -- --revocation | --faults` (bench/controller-scale.ts): its
 * resources at scale, the shipped RBAC with one name per agent in the two MCP-key Roles, and the
 * state a finished reconcile leaves, written to the API-server double's storage. Used by the double's
 * own process (bench/double-child.ts); the sizes come from the same environment variables in both
 * processes.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readUpstream } from '../controller/kube/discovery.ts';
import { type ClusterState, type ClusterWriter, Reconciler } from '../controller/reconcile.ts';
import { loadResources } from '../controller/render-command.ts';
import type {
  K8sObject,
  OwnResource,
  PartnerClient,
  Resources,
  RetrievalAgent,
  RetrievalRoom,
} from '../controller/types.ts';
import type { ApiServerDouble } from '../testkit/controller/apiserver.ts';
import { kustomizeDocs, RbacAuthorizer } from '../testkit/controller/rbac.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
export const MODE = process.argv.includes('--faults') ? 'faults' : 'revocation';
export const AGENTS = Number(process.env['BENCH_AGENTS'] ?? 1000);
export const ROOMS = Number(process.env['BENCH_ROOMS'] ?? (MODE === 'faults' ? 10_000 : 100_000));
export const PARTNERS = Number(process.env['BENCH_PARTNERS'] ?? 1000);
export const LATENCY = Number(process.env['BENCH_LATENCY_MS'] ?? 2);
export const NS = 'kagent';
export const RV = 'retrieval.fgentic.dev/v1alpha1';
export const agentName = (i: number) => `retrieval-agent-${String(i).padStart(4, '0')}`;
export const keySecret = (i: number) => `${agentName(i)}-mcp-credential`;
export const roomIdOf = (i: number) => `!r${i}:org-a.example`;

export function corpus(): Resources {
  const base = loadResources([join(HERE, '../examples')]);
  const tpl = base.agents[0] as RetrievalAgent;
  const agents: RetrievalAgent[] = Array.from({ length: AGENTS }, (_, i) => ({
    ...tpl,
    metadata: { name: agentName(i), namespace: NS },
    spec: {
      ...tpl.spec,
      public: i % 2 === 0,
      rateLimit: { requestsPerMinute: 30 + (i % 90) },
      mcpApiKeySecretRef: { name: keySecret(i), key: 'authorization' },
    },
  }));
  const rooms: RetrievalRoom[] = Array.from({ length: ROOMS }, (_, i) => ({
    apiVersion: RV,
    kind: 'RetrievalRoom',
    metadata: { name: `room-${i}` },
    spec: {
      roomId: roomIdOf(i),
      allowedClassifications: i % 2 === 0 ? ['approved_non_public', 'public'] : ['public'],
      ...(i % 2 === 0 ? { agreementRef: `agreement-${i}` } : {}),
    },
  }));
  const partners: PartnerClient[] = Array.from({ length: PARTNERS }, (_, i) => ({
    apiVersion: RV,
    kind: 'PartnerClient',
    metadata: { name: `partner-${i}` },
    spec: {
      issuer: 'https://issuer.example',
      audience: 'fgentic-a2a',
      azp: `org-${i}-a2a`,
      policyId: `org-${i}`,
      groups: [`partner/org-${i}/docs`, `partner/org-${i}/wiki`],
      allowedClassifications: ['public'],
      agents: [0, 1, 2].map((k) => ({ namespace: NS, name: agentName((i * 3 + k) % AGENTS) })),
    },
  }));
  return { platforms: base.platforms, agents, rooms, partners };
}

export function rbac(): RbacAuthorizer {
  // The shipped Roles, with one name per agent in each of the two MCP-key Roles.
  const names: Record<string, string[]> = {
    'fgentic-retrieval-controller-mcp-keys': Array.from({ length: AGENTS }, (_, i) => keySecret(i)),
    'fgentic-retrieval-controller-mcp-key-mirrors': Array.from(
      { length: AGENTS },
      (_, i) => `fgentic-mcp-key.${NS}.${agentName(i)}`,
    ),
  };
  const docs = kustomizeDocs(join(HERE, '../deploy/base')).map((d) => {
    const extra = d['kind'] === 'Role' ? names[d['metadata']?.name] : undefined;
    if (!extra) return d;
    return {
      ...d,
      rules: (d['rules'] as { resourceNames?: string[] }[]).map((r) => ({ ...r, resourceNames: extra })),
    };
  });
  return new RbacAuthorizer(docs);
}

/**
 * The state a finished reconcile leaves, written to storage (as bench/controller.ts does). The MCP
 * key mirrors are left out (their owner reference names the uid the API server gives their policy):
 * the controller's first pass writes them.
 */
export async function seed(api: ApiServerDouble, input: Resources): Promise<void> {
  for (const r of [...input.platforms, ...input.agents, ...input.rooms, ...input.partners]) api.put(r);
  for (let i = 0; i < AGENTS; i++)
    api.put({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: keySecret(i), namespace: NS },
      type: 'Opaque',
      data: {
        authorization: Buffer.from(`Bearer mcp-key-${String(i).padStart(16, '0')}`).toString('base64'),
      },
    });
  await seedReconciled(api);
}

/**
 * Writes into the double what a finished reconcile leaves (every rendered object, every status),
 * computed by the shipped Reconciler against an in-memory cluster: an initial sync of this many
 * objects through the double would take most of a run and is not what is measured.
 */
export async function seedReconciled(
  api: ApiServerDouble,
): Promise<{ objects: number; result: Awaited<ReturnType<Reconciler['pass']>> }> {
  const own = {
    platforms: api.list(RV, 'RetrievalPlatform'),
    agents: api.list(RV, 'RetrievalAgent'),
    rooms: api.list(RV, 'RetrievalRoom'),
    partners: api.list(RV, 'PartnerClient'),
  } as unknown as Resources;
  const byKind: Record<string, OwnResource[]> = {
    RetrievalPlatform: own.platforms,
    RetrievalAgent: own.agents,
    RetrievalRoom: own.rooms,
    PartnerClient: own.partners,
  };
  const objects = new Map<string, K8sObject>();
  const k = (o: K8sObject) => `${o.apiVersion}|${o.kind}|${o.metadata.namespace ?? ''}|${o.metadata.name}`;
  let uid = 0;
  const memory: ClusterWriter & ClusterState = {
    own: <T extends OwnResource>(kind: string) => (byKind[kind] ?? []) as T[],
    rendered: (apiVersion, kind) => [...objects.values()].filter((o) => o.apiVersion === apiVersion && o.kind === kind),
    live: (apiVersion, kind, namespace, name) => objects.get(`${apiVersion}|${kind}|${namespace ?? ''}|${name}`),
    apply: async (o) => {
      const stored = { ...o, metadata: { ...o.metadata, uid: `seed-${uid++}` } };
      objects.set(k(o), stored);
      return stored;
    },
    delete: async (o) => objects.delete(k(o)),
    patchStatus: async (res, status) => {
      res.status = { ...(res.status ?? {}), ...status };
      return undefined;
    },
    event: async () => undefined,
    readSecretKey: async (namespace, name, key) => {
      const s = api.get('v1', 'Secret', namespace, name) as { data?: Record<string, string> } | undefined;
      const v = s?.data?.[key];
      return v === undefined ? undefined : Buffer.from(v, 'base64').toString('utf8');
    },
    readMirror: async () => undefined,
    upstream: () => readUpstream(api.kubeConfig()),
  };
  const result = await new Reconciler(memory).pass(memory);
  for (const o of objects.values()) {
    if (o.kind === 'Secret') continue;
    const { uid: _u, ...metadata } = o.metadata;
    api.put({ ...o, metadata });
  }
  for (const r of Object.values(byKind).flat()) api.put(r);
  return { objects: objects.size, result };
}
