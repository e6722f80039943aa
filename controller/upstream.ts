/**
 * Which kagent and agentgateway the controller faces, and whether the rendered design holds on them.
 * Pure: the facts come from API discovery and the published OpenAPI v3 schema (controller/kube/
 * discovery.ts reads them). What changes after the supported releases is summarised, with sources, in
 * the research note on upstream drift; the rules below check the API shape each change leaves behind:
 *
 * - kagent v0.9.x (supported): `kagent.dev/v1alpha2` serves `agents` and `remotemcpservers`; the
 *   Agent's `spec.declarative.runtime` defaults to `python`; MCP tools carry `headersFrom`.
 * - kagent v0.10: the runtime default becomes `go` and Agents gain `isolateSessions`.
 * - kagent 1.0: the Agent reconciler is gone; `v1alpha3` serves SandboxAgents, tools bind through
 *   MCPToolBindings (without `allowedHeaders`), so a rendered Agent would do nothing.
 * - agentgateway v1.3.x and v1.4.x (supported): `agentgateway.dev/v1alpha1` serves
 *   `agentgatewaypolicies` and `agentgatewaybackends` (rendered objects pass both releases' CRDs).
 */

export interface ServedVersion {
  version: string;
  resources: string[];
}

export interface UpstreamFacts {
  /** Served versions per API group (only the groups below matter). */
  groups: Record<string, ServedVersion[]>;
  /** OpenAPI v3 schema of kagent.dev/v1alpha2 Agent, when the API server publishes it. */
  kagentAgentSchema?: Record<string, unknown>;
}

export interface UpstreamVerdict {
  supported: boolean;
  /** What was seen, for status and logs: served group versions and the Agent API fingerprint. */
  seen: string;
  problems: string[];
}

export const KAGENT = 'kagent.dev';
export const AGENTGATEWAY = 'agentgateway.dev';

type S = { [k: string]: unknown } | undefined;
const prop = (s: S, ...path: string[]): S => {
  let cur = s;
  for (const p of path)
    cur = (p === '[]' ? cur?.['items'] : (cur?.['properties'] as Record<string, unknown> | undefined)?.[p]) as S;
  return cur;
};

function mentions(s: unknown, name: string): boolean {
  if (!s || typeof s !== 'object') return false;
  const props = (s as Record<string, unknown>)['properties'];
  if (props && typeof props === 'object' && Object.hasOwn(props, name)) return true;
  return Object.values(s as Record<string, unknown>).some((v) => mentions(v, name));
}

function serves(f: UpstreamFacts, group: string, version: string, ...resources: string[]): boolean {
  const v = f.groups[group]?.find((x) => x.version === version);
  return !!v && resources.every((r) => v.resources.includes(r));
}

export function judgeUpstream(f: UpstreamFacts): UpstreamVerdict {
  const problems: string[] = [];
  const kagent = f.groups[KAGENT] ?? [];
  const allKagent = kagent.flatMap((v) => v.resources);
  if (!serves(f, AGENTGATEWAY, 'v1alpha1', 'agentgatewaypolicies', 'agentgatewaybackends'))
    problems.push('agentgateway.dev/v1alpha1 AgentgatewayPolicy/AgentgatewayBackend not served');
  if (!serves(f, KAGENT, 'v1alpha2', 'agents', 'remotemcpservers'))
    problems.push('kagent.dev/v1alpha2 Agent/RemoteMCPServer not served');
  if (allKagent.includes('sandboxagents') || allKagent.includes('mcptoolbindings'))
    problems.push('kagent 1.0 API (SandboxAgent/MCPToolBinding): rendered Agents are not reconciled');
  let fingerprint = 'Agent schema not published';
  const declarative = prop(f.kagentAgentSchema, 'spec', 'declarative');
  if (f.kagentAgentSchema) {
    const runtime = prop(declarative, 'runtime')?.['default'];
    fingerprint = `Agent runtime default ${runtime ?? 'unset'}`;
    if (runtime !== 'python') problems.push(`kagent Agent runtime default is ${runtime ?? 'unset'} (v0.9.x: python)`);
    if (mentions(f.kagentAgentSchema, 'isolateSessions'))
      problems.push('kagent Agent has isolateSessions (kagent v0.10 or later)');
    if (!prop(declarative, 'tools', '[]', 'headersFrom'))
      problems.push('kagent Agent tools have no headersFrom (the MCP key cannot be sent)');
  } else if (serves(f, KAGENT, 'v1alpha2', 'agents')) problems.push('kagent Agent v1alpha2 schema not published');
  const list = (g: string) =>
    `${g}/[${(f.groups[g] ?? [])
      .map((v) => v.version)
      .sort()
      .join(',')}]`;
  return {
    supported: problems.length === 0,
    seen: `${list(KAGENT)} ${list(AGENTGATEWAY)}; ${fingerprint}`,
    problems,
  };
}
