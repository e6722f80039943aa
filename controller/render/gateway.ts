/**
 * agentgateway v1.3.1 (`agentgateway.dev/v1alpha1`) and Gateway API objects for every retrieval Agent:
 * the bridge's local A2A route, the partners' public A2A route, the per-Agent MCP route, the exclusion
 * of the generic kagent A2A prefix, the PreRouting strip of client-sent X-Fgentic-Identity and the
 * ext-auth backend timeout. Policy shapes follow docs/upstream.md#agentgateway-version.
 */
import type { K8sObject } from '../types.ts';
import * as cel from './cel.ts';
import {
  type Agent,
  KAGENT_CONTROLLER,
  MCP_KEY_LABEL,
  MCP_ROUTE_PATH,
  MCP_TOOL,
  type Model,
  meta,
  platformOwner,
  workloadOf,
} from './model.ts';

const AGW = 'agentgateway.dev/v1alpha1';
const GW_API = 'gateway.networking.k8s.io/v1';
const GW_GROUP = 'gateway.networking.k8s.io';
const A2A_BODY_LIMIT = '1Mi';
const MCP_BODY_LIMIT = '256Ki';
const EXT_AUTH_TIMEOUT = '1s';

export const names = {
  a2aBackend: (a: Agent) => `fgentic-a2a.${a.namespace}.${a.name}`,
  localRoute: (a: Agent) => `fgentic-a2a-local.${a.namespace}.${a.name}`,
  publicRoute: (a: Agent) => `fgentic-a2a-public.${a.namespace}.${a.name}`,
  excludeRoute: (a: Agent) => `fgentic-a2a-exclude.${a.namespace}.${a.name}`,
  cardRoute: (a: Agent) => `fgentic-a2a-card.${a.namespace}.${a.name}`,
  mcpRoute: (a: Agent) => `fgentic-mcp.${a.namespace}.${a.name}`,
  mcpBackend: 'fgentic-knowledge-retrieval',
  strip: 'fgentic-strip-identity',
  stripShared: 'fgentic-strip-identity-except-mcp',
  extAuthTimeout: 'fgentic-projector-timeout',
  projectorGrant: 'fgentic-projector-from-gateway',
  jwksGrant: 'fgentic-jwks-from-gateway',
  jwksTls: 'fgentic-jwks-tls',
};

function protocolOf(m: Model): cel.A2AProtocol {
  return m.platform.a2aBackend === 'controller' ? '1.0' : '0.3';
}

/** Path the A2A backend expects: kagent's controller route, or `/` on the Agent pod. */
function backendPath(m: Model, a: Agent): string {
  return m.platform.a2aBackend === 'controller' ? a.localPath : '/';
}

function parentRef(m: Model, listener: string) {
  const gw = m.platform.spec.gateway;
  return { group: GW_GROUP, kind: 'Gateway', name: gw.name, namespace: gw.namespace, sectionName: listener };
}

function routeTarget(name: string) {
  return [{ group: GW_GROUP, kind: 'HTTPRoute', name }];
}

function projectorRef(m: Model) {
  return {
    group: '',
    kind: 'Service',
    name: m.platform.projector.service,
    namespace: m.platform.spec.namespaces.retrieval,
    port: m.platform.projector.port,
  };
}

function a2aRoute(m: Model, a: Agent, name: string, listener: string, path: string, timeout?: string): K8sObject {
  const gwNs = m.platform.spec.gateway.namespace;
  const filters: Record<string, unknown>[] = [
    // The one header modifier of this route: after ext-auth and authorization, before the backend.
    { type: 'RequestHeaderModifier', requestHeaderModifier: { remove: ['X-Fgentic-Room-Context'] } },
  ];
  const target = backendPath(m, a);
  if (target !== path)
    filters.push({
      type: 'URLRewrite',
      urlRewrite: { path: { type: 'ReplaceFullPath', replaceFullPath: target } },
    });
  return {
    apiVersion: GW_API,
    kind: 'HTTPRoute',
    metadata: meta(name, gwNs, platformOwner(m.platform)),
    spec: {
      parentRefs: [parentRef(m, listener)],
      rules: [
        {
          name: 'a2a',
          matches: [{ path: { type: 'Exact', value: path } }],
          filters,
          backendRefs: [{ group: 'agentgateway.dev', kind: 'AgentgatewayBackend', name: names.a2aBackend(a) }],
          ...(timeout ? { timeouts: { request: timeout } } : {}),
        },
      ],
    },
  };
}

function policy(m: Model, name: string, namespace: string, spec: Record<string, unknown>): K8sObject {
  return {
    apiVersion: AGW,
    kind: 'AgentgatewayPolicy',
    metadata: meta(name, namespace, platformOwner(m.platform)),
    spec,
  };
}

function localObjects(m: Model, a: Agent): K8sObject[] {
  const p = m.platform;
  const gwNs = p.spec.gateway.namespace;
  const r: cel.LocalRouteCel = {
    workload: p.spec.bridge.workload,
    path: a.localPath,
    protocol: protocolOf(m),
    agent: a,
  };
  return [
    a2aRoute(m, a, names.localRoute(a), p.spec.gateway.localListener, a.localPath),
    policy(m, names.localRoute(a), gwNs, {
      targetRefs: routeTarget(names.localRoute(a)),
      traffic: {
        apiKeyAuthentication: { mode: 'Strict', secretRef: { name: p.spec.bridge.apiKeySecretRef.name } },
        extAuth: {
          backendRef: projectorRef(m),
          failureMode: 'FailClosed',
          http: {
            allowedRequestHeaders: ['x-user-id', 'x-fgentic-room-context'],
            addRequestHeaders: cel.localCheckHeaders(r),
            allowedResponseHeaders: [cel.HEADER.identity, cel.HEADER.userId],
          },
        },
        authorization: { action: 'Require', policy: { matchExpressions: cel.localAuthorization(r) } },
        buffer: { request: { maxBytes: A2A_BODY_LIMIT } },
      },
    }),
    ...cardObjects(m, a),
    // The generic kagent A2A prefix (/api/a2a) must not reach a retrieval Agent: the longer prefix wins
    // over it, the Exact local route wins over this one (Gateway API match precedence).
    {
      apiVersion: GW_API,
      kind: 'HTTPRoute',
      metadata: meta(names.excludeRoute(a), gwNs, platformOwner(p)),
      spec: {
        parentRefs: [parentRef(m, p.spec.gateway.localListener)],
        rules: [{ name: 'exclude', matches: [{ path: { type: 'PathPrefix', value: a.localPath } }] }],
      },
    },
    policy(m, names.excludeRoute(a), gwNs, {
      targetRefs: routeTarget(names.excludeRoute(a)),
      traffic: { directResponse: { status: 404 } },
    }),
  ];
}

/** The bridge's AgentCard read (ADR decision 5 (docs/decisions.md#adr-5): discovery is validated, never routing authority). */
function cardObjects(m: Model, a: Agent): K8sObject[] {
  const p = m.platform;
  const gwNs = p.spec.gateway.namespace;
  const path = `${a.localPath}${cel.AGENT_CARD_SUFFIX}`;
  const target = m.platform.a2aBackend === 'controller' ? path : cel.AGENT_CARD_SUFFIX;
  return [
    {
      apiVersion: GW_API,
      kind: 'HTTPRoute',
      metadata: meta(names.cardRoute(a), gwNs, platformOwner(p)),
      spec: {
        parentRefs: [parentRef(m, p.spec.gateway.localListener)],
        rules: [
          {
            name: 'card',
            matches: [{ path: { type: 'Exact', value: path }, method: 'GET' }],
            ...(target !== path
              ? {
                  filters: [
                    {
                      type: 'URLRewrite',
                      urlRewrite: { path: { type: 'ReplaceFullPath', replaceFullPath: target } },
                    },
                  ],
                }
              : {}),
            backendRefs: [{ group: 'agentgateway.dev', kind: 'AgentgatewayBackend', name: names.a2aBackend(a) }],
          },
        ],
      },
    },
    policy(m, names.cardRoute(a), gwNs, {
      targetRefs: routeTarget(names.cardRoute(a)),
      traffic: {
        apiKeyAuthentication: { mode: 'Strict', secretRef: { name: p.spec.bridge.apiKeySecretRef.name } },
        authorization: {
          action: 'Require',
          policy: { matchExpressions: cel.cardAuthorization({ workload: p.spec.bridge.workload, path }) },
        },
      },
    }),
  ];
}

function publicObjects(m: Model, a: Agent): K8sObject[] {
  const p = m.platform;
  const jwt = p.spec.jwt;
  const listener = p.spec.gateway.publicListener;
  if (!a.public || a.partners.length === 0 || !jwt || !p.jwks || !listener) return [];
  const gwNs = p.spec.gateway.namespace;
  const audiences = [...new Set(a.partners.map((x) => x.res.spec.audience))].sort();
  const azps = [...new Set(a.partners.map((x) => x.res.spec.azp))].sort();
  const r: cel.PublicRouteCel = {
    issuer: jwt.issuer,
    audiences,
    azps,
    path: a.publicPath,
    protocol: protocolOf(m),
    agent: a,
  };
  const jwks =
    'inline' in p.jwks
      ? { inline: p.jwks.inline }
      : {
          remote: {
            jwksPath: p.jwks.path,
            backendRef: {
              group: '',
              kind: 'Service',
              name: p.jwks.service,
              namespace: p.jwks.namespace,
              port: p.jwks.port,
            },
          },
        };
  return [
    a2aRoute(m, a, names.publicRoute(a), listener, a.publicPath, `${p.timeout}s`),
    policy(m, names.publicRoute(a), gwNs, {
      targetRefs: routeTarget(names.publicRoute(a)),
      traffic: {
        jwtAuthentication: { mode: 'Strict', providers: [{ issuer: jwt.issuer, audiences, jwks }] },
        extAuth: {
          backendRef: projectorRef(m),
          failureMode: 'FailClosed',
          http: {
            // Never empty (an empty list means "forward Authorization"); the one entry is overwritten by CEL.
            allowedRequestHeaders: ['x-fgentic-check-route'],
            addRequestHeaders: cel.publicCheckHeaders(r),
            allowedResponseHeaders: [cel.HEADER.identity, cel.HEADER.userId],
          },
        },
        authorization: { action: 'Require', policy: { matchExpressions: cel.publicAuthorization(r) } },
        buffer: { request: { maxBytes: A2A_BODY_LIMIT } },
      },
    }),
  ];
}

function mcpObjects(m: Model, a: Agent): K8sObject[] {
  const p = m.platform;
  const gwNs = p.spec.gateway.namespace;
  const workload = workloadOf(a);
  return [
    {
      apiVersion: GW_API,
      kind: 'HTTPRoute',
      metadata: meta(names.mcpRoute(a), gwNs, platformOwner(p)),
      spec: {
        parentRefs: [parentRef(m, p.mcpListener)],
        rules: [
          {
            name: 'mcp',
            matches: [
              {
                path: { type: 'Exact', value: MCP_ROUTE_PATH },
                headers: [{ type: 'Exact', name: cel.HEADER.retrievalAgent, value: workload }],
              },
            ],
            backendRefs: [{ group: 'agentgateway.dev', kind: 'AgentgatewayBackend', name: names.mcpBackend }],
          },
        ],
      },
    },
    policy(m, names.mcpRoute(a), gwNs, {
      targetRefs: routeTarget(names.mcpRoute(a)),
      traffic: {
        apiKeyAuthentication: { mode: 'Strict', secretSelector: { matchLabels: { [MCP_KEY_LABEL]: 'mcp' } } },
        authorization: {
          action: 'Require',
          policy: {
            matchExpressions: cel.mcpAuthorization({ workload, path: MCP_ROUTE_PATH, tool: MCP_TOOL }),
          },
        },
        // One bucket per policy, i.e. per Agent (the route is per Agent).
        rateLimit: { local: [{ requests: a.rpm, unit: 'Minutes' }] },
        buffer: { request: { maxBytes: MCP_BODY_LIMIT } },
        // After authorization: the agent the gateway authenticated, for the retrieval server to bind
        // the projection to (a client-sent value was refused above and is overwritten here).
        transformation: {
          request: { set: [{ name: cel.HEADER.callerAgent, value: cel.authenticatedWorkload() }] },
        },
      },
      backend: {
        mcp: {
          authorization: { action: 'Allow', policy: { matchExpressions: cel.mcpToolAllowlist(MCP_TOOL) } },
        },
      },
    }),
  ];
}

function a2aBackend(m: Model, a: Agent): K8sObject {
  const p = m.platform;
  const target =
    p.a2aBackend === 'controller'
      ? {
          host: `${KAGENT_CONTROLLER.service}.${p.spec.namespaces.kagent}.svc.cluster.local`,
          port: KAGENT_CONTROLLER.port,
        }
      : { host: `${a.name}.${a.namespace}.svc.cluster.local`, port: 8080 };
  return {
    apiVersion: AGW,
    kind: 'AgentgatewayBackend',
    metadata: meta(names.a2aBackend(a), p.spec.gateway.namespace, platformOwner(p)),
    spec: { a2a: target },
  };
}

function sharedObjects(m: Model): K8sObject[] {
  const p = m.platform;
  const gw = p.spec.gateway;
  const retrievalNs = p.spec.namespaces.retrieval;
  const owner = platformOwner(p);
  const out: K8sObject[] = [
    {
      apiVersion: AGW,
      kind: 'AgentgatewayBackend',
      metadata: meta(names.mcpBackend, gw.namespace, owner),
      spec: {
        mcp: {
          failureMode: 'FailClosed',
          targets: [
            {
              name: 'knowledge-retrieval',
              static: {
                host: `${p.retrieval.service}.${retrievalNs}.svc.cluster.local`,
                port: p.retrieval.port,
                path: '/mcp',
                protocol: 'StreamableHTTP',
              },
            },
          ],
        },
      },
    },
    // HTTP ext-auth defaults to a 200 ms deadline; the backend policy on the projector Service raises it.
    policy(m, names.extAuthTimeout, retrievalNs, {
      targetRefs: [{ group: '', kind: 'Service', name: p.projector.service }],
      backend: { http: { requestTimeout: EXT_AUTH_TIMEOUT } },
    }),
    {
      apiVersion: 'gateway.networking.k8s.io/v1beta1',
      kind: 'ReferenceGrant',
      metadata: meta(names.projectorGrant, retrievalNs, owner),
      spec: {
        from: [{ group: 'agentgateway.dev', kind: 'AgentgatewayPolicy', namespace: gw.namespace }],
        to: [{ group: '', kind: 'Service', name: p.projector.service }],
      },
    },
  ];
  // Client-sent X-Fgentic-Identity never survives routing on an A2A listener. On a listener that also
  // carries the MCP route (kagent's proxy.url sends Agent pods' MCP calls to the proxy's :8080), the
  // strip skips exactly the MCP path, where the Agent pod sends the carrier legitimately.
  const a2aListeners = [gw.localListener, ...(gw.publicListener ? [gw.publicListener] : [])];
  const ref = (l: string) => ({ group: GW_GROUP, kind: 'Gateway', name: gw.name, sectionName: l });
  const remove = { request: { remove: [cel.HEADER.identity] } };
  const plain = a2aListeners.filter((l) => l !== p.mcpListener);
  if (plain.length)
    out.push(
      policy(m, names.strip, gw.namespace, {
        targetRefs: plain.map(ref),
        traffic: { phase: 'PreRouting', transformation: remove },
      }),
    );
  if (a2aListeners.includes(p.mcpListener))
    out.push(
      policy(m, names.stripShared, gw.namespace, {
        targetRefs: [ref(p.mcpListener)],
        traffic: {
          phase: 'PreRouting',
          transformation: { conditional: [{ condition: cel.notMcpPath(MCP_ROUTE_PATH), policy: remove }] },
        },
      }),
    );
  if (p.jwks && !('inline' in p.jwks) && m.agents.some((a) => a.public && a.partners.length > 0)) {
    out.push({
      apiVersion: 'gateway.networking.k8s.io/v1beta1',
      kind: 'ReferenceGrant',
      metadata: meta(names.jwksGrant, p.jwks.namespace, owner),
      spec: {
        from: [{ group: 'agentgateway.dev', kind: 'AgentgatewayPolicy', namespace: gw.namespace }],
        to: [{ group: '', kind: 'Service', name: p.jwks.service }],
      },
    });
    if (p.jwks.tls)
      out.push(
        policy(m, names.jwksTls, p.jwks.namespace, {
          targetRefs: [{ group: '', kind: 'Service', name: p.jwks.service }],
          backend: { tls: {} },
        }),
      );
  }
  return out;
}

/** The gateway objects of one Agent: they read the platform, the Agent and its bound partners only. */
export function renderGatewayAgent(m: Model, a: Agent): K8sObject[] {
  return [a2aBackend(m, a), ...localObjects(m, a), ...publicObjects(m, a), ...mcpObjects(m, a)];
}

/** The gateway objects no single Agent owns (they may read the whole set of Agents). */
export function renderGatewayShared(m: Model): K8sObject[] {
  return sharedObjects(m);
}

export function renderGateway(m: Model): K8sObject[] {
  const out = sharedObjects(m);
  for (const a of m.agents) out.push(...renderGatewayAgent(m, a));
  return out;
}
