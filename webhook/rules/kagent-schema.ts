/**
 * A reproduction of the schema and CEL rules of kagent v0.9.11's CRDs (Agent v1alpha2,
 * RemoteMCPServer), with kagent's own messages, so that an Agent the API server would refuse is
 * refused here with the same words and the security rules only ever see well-formed objects. Pure.
 */
import { arr, type Ctx } from './kagent-common.ts';
import { type Findings, field, isObject, type JsonObject } from './types.ts';

/** The reproduced CRD layer (schema + CEL of kagent v0.9.11 v1alpha2); kagent's own messages. */
export function checkCrdV1alpha2(c: Ctx, spec: JsonObject): void {
  const { f } = c;
  checkAgentType(f, spec);
  const decl = field(spec, 'declarative');
  if (!isObject(decl)) return;
  const runtime = field(decl, 'runtime');
  if (runtime !== undefined && runtime !== 'python' && runtime !== 'go')
    f.deny('kagent-schema', 'spec.declarative.runtime', `Unsupported value: ${JSON.stringify(runtime)}`);
  if (Object.hasOwn(decl, 'systemMessage') && Object.hasOwn(decl, 'systemMessageFrom'))
    f.deny('kagent-schema', 'spec.declarative', 'systemMessage and systemMessageFrom are mutually exclusive');
  const tools = field(decl, 'tools');
  if (tools === undefined) return;
  if (!Array.isArray(tools)) {
    f.deny('kagent-schema', 'spec.declarative.tools', 'must be of type array');
    return;
  }
  if (tools.length > 20) f.deny('kagent-schema', 'spec.declarative.tools', 'must have at most 20 items');
  tools.forEach((t, i) => {
    const p = `spec.declarative.tools[${i}]`;
    if (!isObject(t)) {
      f.deny('kagent-schema', p, 'must be of type object');
      return;
    }
    checkToolType(f, t, p);
    checkToolMcpServer(f, t, p);
    checkToolHeaders(f, t, p);
  });
}

/** spec.type, and the one of spec.declarative or spec.byo it requires. */
function checkAgentType(f: Findings, spec: JsonObject): void {
  const type = field(spec, 'type');
  if (type !== undefined && type !== 'Declarative' && type !== 'BYO')
    f.deny(
      'kagent-schema',
      'spec.type',
      `Unsupported value: ${JSON.stringify(type)}: supported values: "Declarative", "BYO"`,
    );
  const effective = type ?? 'Declarative';
  if (
    !(effective === 'Declarative' && isObject(spec['declarative'])) &&
    !(effective === 'BYO' && isObject(spec['byo']))
  )
    f.deny(
      'kagent-schema',
      'spec',
      'declarative must be specified if type is Declarative, or byo must be specified if type is BYO',
    );
  const byo = field(spec, 'byo');
  if (isObject(byo) && Object.hasOwn(byo, 'tools'))
    f.deny('kagent-schema', 'spec.byo.tools', 'unknown field "spec.byo.tools": BYO Agents have no tools');
}

/** A tool's type and the one of mcpServer or agent it requires. */
function checkToolType(f: Findings, t: JsonObject, p: string): void {
  const tt = field(t, 'type');
  const hasMcp = Object.hasOwn(t, 'mcpServer');
  const hasAgent = Object.hasOwn(t, 'agent');
  if (tt === undefined) {
    if (hasMcp || hasAgent) f.deny('kagent-schema', `${p}.type`, 'no such key: type (tools[].type has no default)');
    return;
  }
  if (tt !== 'McpServer' && tt !== 'Agent') {
    f.deny(
      'kagent-schema',
      `${p}.type`,
      `Unsupported value: ${JSON.stringify(tt)}: supported values: "McpServer", "Agent"`,
    );
    return;
  }
  if (hasMcp && tt !== 'McpServer')
    f.deny('kagent-schema', p, 'type.mcpServer must be nil if the type is not McpServer');
  if (!hasMcp && tt === 'McpServer')
    f.deny('kagent-schema', p, 'type.mcpServer must be specified for McpServer filter.type');
  if (hasAgent && tt !== 'Agent') f.deny('kagent-schema', p, 'type.agent must be nil if the type is not Agent');
  if (!hasAgent && tt === 'Agent') f.deny('kagent-schema', p, 'type.agent must be specified for Agent filter.type');
}

/** A tool's mcpServer: its name, its string lists and their bounds. */
function checkToolMcpServer(f: Findings, t: JsonObject, p: string): void {
  const mcp = field(t, 'mcpServer');
  if (Object.hasOwn(t, 'mcpServer') && !isObject(mcp))
    f.deny('kagent-schema', `${p}.mcpServer`, 'must be of type object');
  if (!isObject(mcp)) return;
  const mp = `${p}.mcpServer`;
  if (typeof mcp['name'] !== 'string') f.deny('kagent-schema', `${mp}.name`, 'Required value');
  for (const key of ['toolNames', 'requireApproval', 'allowedHeaders'] as const) {
    const v = field(mcp, key);
    if (v === undefined) continue;
    if (!Array.isArray(v) || v.some((x) => typeof x !== 'string'))
      f.deny('kagent-schema', `${mp}.${key}`, 'must be of type array of strings');
    else if (key !== 'allowedHeaders' && v.length > 50)
      f.deny('kagent-schema', `${mp}.${key}`, 'must have at most 50 items');
  }
  const ra = arr(field(mcp, 'requireApproval'));
  const tn = arr(field(mcp, 'toolNames'));
  if (ra && !ra.every((x) => tn?.includes(x)))
    f.deny('kagent-schema', mp, 'each RequireApproval entry must also appear in ToolNames');
}

/** A tool's headersFrom: each entry named, with exactly one of value or valueFrom. */
function checkToolHeaders(f: Findings, t: JsonObject, p: string): void {
  const hf = field(t, 'headersFrom');
  if (hf === undefined) return;
  if (!Array.isArray(hf)) {
    f.deny('kagent-schema', `${p}.headersFrom`, 'must be of type array');
    return;
  }
  hf.forEach((h, j) => {
    const hp = `${p}.headersFrom[${j}]`;
    if (!isObject(h) || typeof h['name'] !== 'string') {
      f.deny('kagent-schema', hp, 'name: Required value');
      return;
    }
    if (Object.hasOwn(h, 'value') === Object.hasOwn(h, 'valueFrom'))
      f.deny('kagent-schema', hp, 'Exactly one of value or valueFrom must be specified');
  });
}

/** The RemoteMCPServer fields kagent's CRD requires or constrains. */
export function checkRemoteMcpServerSchema(f: Findings, spec: JsonObject): void {
  if (typeof spec['description'] !== 'string') f.deny('kagent-schema', 'spec.description', 'Required value');
  const url = spec['url'];
  if (typeof url !== 'string' || url === '') f.deny('kagent-schema', 'spec.url', 'Required value');
  const proto = spec['protocol'];
  if (proto !== undefined && proto !== 'SSE' && proto !== 'STREAMABLE_HTTP')
    f.deny(
      'kagent-schema',
      'spec.protocol',
      `Unsupported value: ${JSON.stringify(proto)}: supported values: "SSE", "STREAMABLE_HTTP"`,
    );
  if (typeof url === 'string' && url.startsWith('http://') && Object.hasOwn(spec, 'tls'))
    f.deny('kagent-schema', 'spec.tls', 'spec.tls must be unset when spec.url has http:// scheme');
}
