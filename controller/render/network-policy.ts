/**
 * NetworkPolicies in the origin's style (docs/upstream.md#origin-deployment-conventions): a default-deny for the
 * retrieval namespace, then exact label-scoped allows; DNS only to kube-dns; metrics only from
 * Prometheus in `monitoring`. Checked statically only: no CNI runs here.
 */
import type { K8sObject } from '../types.ts';
import {
  AGENT_POD_LABEL,
  AGENT_PORT,
  type Agent,
  agentOwner,
  KAGENT_CONTROLLER,
  type Model,
  meta,
  platformOwner,
  serviceFromUrl,
  urlPort,
} from './model.ts';

const NP = 'networking.k8s.io/v1';
const NS_LABEL = 'kubernetes.io/metadata.name';
const MONITORING = 'monitoring';
const PROMETHEUS = { 'fgentic.dev/metrics-reader': 'prometheus' };
const OTEL = {
  'app.kubernetes.io/instance': 'otel-collector',
  'app.kubernetes.io/name': 'opentelemetry-collector',
};
const KAGENT_CONTROLLER_PODS = {
  'app.kubernetes.io/component': 'controller',
  'app.kubernetes.io/instance': 'kagent',
  'app.kubernetes.io/name': 'kagent',
};

type Peer = Record<string, unknown>;
const peer = (namespace: string, podLabels: Record<string, string>): Peer => ({
  namespaceSelector: { matchLabels: { [NS_LABEL]: namespace } },
  podSelector: { matchLabels: { ...podLabels } },
});
const tcp = (...ports: number[]) => ports.map((port) => ({ protocol: 'TCP', port }));
const DNS = {
  to: [peer('kube-system', { 'k8s-app': 'kube-dns' })],
  ports: [
    { protocol: 'UDP', port: 53 },
    { protocol: 'TCP', port: 53 },
  ],
};

function np(
  m: Model,
  name: string,
  namespace: string,
  spec: Record<string, unknown>,
  owner = platformOwner(m.platform),
): K8sObject {
  return { apiVersion: NP, kind: 'NetworkPolicy', metadata: meta(name, namespace, owner), spec };
}

/** The proxy's pods and the observability egress rule, both read from the platform only. */
function platformPeers(m: Model): { proxy: Peer; observability: Record<string, unknown> } {
  const p = m.platform;
  const obsNs = p.spec.observability?.namespace ?? MONITORING;
  const obsPorts = p.spec.observability?.ports ?? [4317, 4318];
  return {
    proxy: peer(p.spec.gateway.namespace, p.proxyPodLabels),
    observability: { to: [peer(obsNs, p.spec.observability?.podLabels ?? OTEL)], ports: tcp(...obsPorts) },
  };
}

/** The NetworkPolicy of one retrieval Agent's pod (it reads the platform and that Agent only). */
export function renderAgentNetworkPolicy(m: Model, a: Agent): K8sObject {
  const { proxy, observability } = platformPeers(m);
  return agentPolicy(m, a, proxy, observability);
}

export function renderNetworkPolicies(m: Model): K8sObject[] {
  const out = renderSharedNetworkPolicies(m);
  const { proxy, observability } = platformPeers(m);
  for (const a of m.agents) out.push(agentPolicy(m, a, proxy, observability));
  return out;
}

/** The policies of the retrieval namespace (default deny, retrieval server, projector). */
export function renderSharedNetworkPolicies(m: Model): K8sObject[] {
  const p = m.platform;
  const ns = p.spec.namespaces.retrieval;
  const gwNs = p.spec.gateway.namespace;
  const { proxy, observability } = platformPeers(m);
  // The servers serve /metrics on their one port; Prometheus may reach exactly that port.
  const metricsIn = (port: number) => ({ from: [peer(MONITORING, PROMETHEUS)], ports: tcp(port) });
  const retrievalPods = { matchLabels: { 'app.kubernetes.io/name': p.retrieval.service } };
  const projectorPods = { matchLabels: { 'app.kubernetes.io/name': p.projector.service } };
  const db = p.spec.database ?? {};
  const embeddingsPort = urlPort(p.spec.embeddings.url) ?? 8082;
  const embeddingsSvc = serviceFromUrl(p.spec.embeddings.url);
  const embeddingsPeer =
    embeddingsSvc && embeddingsSvc.namespace !== gwNs
      ? peer(embeddingsSvc.namespace, { 'app.kubernetes.io/name': embeddingsSvc.service })
      : proxy;

  const databaseEgress = {
    to: [peer(db.namespace ?? 'postgres', db.podLabels ?? { 'cnpg.io/cluster': 'platform-pg' })],
    ports: tcp(db.port ?? 5432),
  };
  const out: K8sObject[] = [
    np(m, 'fgentic-retrieval-default-deny', ns, { podSelector: {}, policyTypes: ['Ingress', 'Egress'] }),
    // Retrieval: reachable only from the agentgateway proxy (MCP) and Prometheus (metrics).
    np(m, 'knowledge-retrieval-ingress', ns, {
      podSelector: retrievalPods,
      policyTypes: ['Ingress'],
      ingress: [{ from: [proxy], ports: tcp(p.retrieval.port) }, metricsIn(p.retrieval.port)],
    }),
    // Retrieval egress: DNS, its database, the query-embeddings listener, observability, and the API
    // server by port (not a pod), where it watches its configuration ConfigMap. No model path.
    np(m, 'knowledge-retrieval-egress', ns, {
      podSelector: retrievalPods,
      policyTypes: ['Egress'],
      egress: [
        DNS,
        { ports: tcp(443, 6443) },
        databaseEgress,
        { to: [embeddingsPeer], ports: tcp(embeddingsPort) },
        observability,
      ],
    }),
    // Projector: ext-auth calls come only from the proxy.
    np(m, 'fgentic-projector-ingress', ns, {
      podSelector: projectorPods,
      policyTypes: ['Ingress'],
      ingress: [{ from: [proxy], ports: tcp(p.projector.port) }, metricsIn(p.projector.port)],
    }),
  ];
  // The API server is not a pod, so its edge is by port, as for the controller (deploy/base):
  // the projector lists and watches its configuration ConfigMaps (projector/kube-store.ts).
  const apiServer = { ports: tcp(443, 6443) };
  const egress: Record<string, unknown>[] = [DNS, apiServer, observability];
  // Ledger mode: the projector records every minted value in the database (docs/ledger.md).
  if (p.spec.capability === 'ledger') egress.push(databaseEgress);
  const live = p.spec.liveRoomCheck;
  if (live?.enabled && live.homeserverUrl) {
    const hs = serviceFromUrl(live.homeserverUrl);
    if (hs)
      egress.push({
        to: [{ namespaceSelector: { matchLabels: { [NS_LABEL]: hs.namespace } } }],
        ports: tcp(hs.port),
      });
  }
  out.push(np(m, 'fgentic-projector-egress', ns, { podSelector: projectorPods, policyTypes: ['Egress'], egress }));
  return out;
}

/** The retrieval Agent pod: in only from its A2A caller; out only to DNS, the proxy, kagent, observability. */
function agentPolicy(m: Model, a: Agent, proxy: Peer, observability: Record<string, unknown>): K8sObject {
  const p = m.platform;
  const kagentCtl = peer(p.spec.namespaces.kagent, KAGENT_CONTROLLER_PODS);
  const caller = p.a2aBackend === 'controller' ? kagentCtl : proxy;
  return np(
    m,
    `fgentic-retrieval-agent.${a.name}`,
    a.namespace,
    {
      podSelector: { matchLabels: { [AGENT_POD_LABEL]: a.name } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [{ from: [caller], ports: tcp(AGENT_PORT) }],
      egress: [DNS, { to: [proxy] }, { to: [kagentCtl], ports: tcp(KAGENT_CONTROLLER.port) }, observability],
    },
    agentOwner(a),
  );
}
