/**
 * Test-only: the upstream APIs an API-server double can serve, as discovery and OpenAPI v3 show them.
 * kagent v0.9.11 uses the Agent schema of its own CRD (./upstream/). kagent v0.10 and 1.0 follow the
 * upstream changes (v0.10.0-rc3: `runtime` default `go`, `isolateSessions`; 1.0: Agent reconciler
 * removed, v1alpha3 SandboxAgent, MCPToolBinding).
 */
import { upstreamCrd } from './schema.ts';

export interface KindInfo {
  apiVersion: string;
  kind: string;
  plural: string;
  namespaced: boolean;
}

export interface UpstreamProfile {
  name: string;
  kinds: KindInfo[];
  /** OpenAPI v3 schema of kagent.dev/v1alpha2 Agent, when that version serves Agents. */
  agentSchema?: Record<string, any>;
}

const ns = (apiVersion: string, kind: string, plural: string): KindInfo => ({
  apiVersion,
  kind,
  plural,
  namespaced: true,
});

const AGENTGATEWAY_V1ALPHA1 = [
  ns('agentgateway.dev/v1alpha1', 'AgentgatewayBackend', 'agentgatewaybackends'),
  ns('agentgateway.dev/v1alpha1', 'AgentgatewayPolicy', 'agentgatewaypolicies'),
];
const KAGENT_V1ALPHA2 = [
  ns('kagent.dev/v1alpha2', 'RemoteMCPServer', 'remotemcpservers'),
  ns('kagent.dev/v1alpha2', 'Agent', 'agents'),
];

function agentSchema09(): Record<string, any> {
  const crd = upstreamCrd('kagent-v0.9.11.agents.json');
  const v = crd['spec'].versions.find((x: { name: string }) => x.name === 'v1alpha2');
  return v.schema.openAPIV3Schema;
}

export function kagent09(): UpstreamProfile {
  return {
    name: 'kagent v0.9.11',
    kinds: [...KAGENT_V1ALPHA2, ...AGENTGATEWAY_V1ALPHA1],
    agentSchema: agentSchema09(),
  };
}

export function kagent010(): UpstreamProfile {
  const s = structuredClone(agentSchema09());
  const declarative = s['properties'].spec.properties.declarative;
  declarative.properties.runtime.default = 'go';
  declarative.properties.isolateSessions = { type: 'boolean' };
  return { name: 'kagent v0.10', kinds: [...KAGENT_V1ALPHA2, ...AGENTGATEWAY_V1ALPHA1], agentSchema: s };
}

export function kagent10(): UpstreamProfile {
  return {
    name: 'kagent 1.0',
    kinds: [
      ns('kagent.dev/v1alpha2', 'RemoteMCPServer', 'remotemcpservers'),
      ns('kagent.dev/v1alpha3', 'SandboxAgent', 'sandboxagents'),
      ns('kagent.dev/v1alpha3', 'MCPToolBinding', 'mcptoolbindings'),
      ...AGENTGATEWAY_V1ALPHA1,
    ],
  };
}

/** kagent v0.9.11 without agentgateway installed. */
export function noAgentgateway(): UpstreamProfile {
  return { ...kagent09(), name: 'no agentgateway', kinds: KAGENT_V1ALPHA2 };
}
