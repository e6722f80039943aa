/**
 * Admission rules for kagent.dev Agents (v1alpha2, and v1alpha1 which kagent v0.9.11 serves without
 * conversion) and for the retrieval RemoteMCPServer. Pure: the request, the view of the other objects
 * and the configuration in; findings out.
 *
 * ADR 0017 decision 10 (docs/decisions.md#adr-10): only the rendered retrieval Agent may carry `allowedHeaders`, exactly
 * `[X-Fgentic-Identity]`, on its single tool entry for the exact `knowledge-retrieval` RemoteMCPServer;
 * `requireApproval` stays absent there (the HITL resume turn skips the header refresh).
 */
import {
  type AdmissionInput,
  type ClusterView,
  Findings,
  field,
  isObject,
  type Json,
  type JsonObject,
  KAGENT_GROUP,
  type KubeObject,
  labels,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  meta,
  nameOf,
  namespaceOf,
  RETRIEVAL_GROUP,
  ROLE_LABEL,
  ROLE_VALUE,
  type RulesConfig,
  str,
  type Verdict,
} from './types.ts';

/** RFC 9110 field-name (token) characters. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const CREDENTIAL_HEADERS = new Set(['authorization', 'proxy-authorization', 'cookie', 'set-cookie']);
const MAX_ENTRY_FINDINGS = 8;

/** Whether an object claims to be a rendered retrieval Agent (either label is enough to claim it). */
function claimsRetrieval(o: KubeObject | null): boolean {
  if (!o) return false;
  const l = labels(o);
  return Object.hasOwn(l, ROLE_LABEL) || l[MANAGED_BY_LABEL] === MANAGED_BY_VALUE;
}

function hasExactRetrievalLabels(o: KubeObject): boolean {
  const l = labels(o);
  return l[ROLE_LABEL] === ROLE_VALUE && l[MANAGED_BY_LABEL] === MANAGED_BY_VALUE;
}

/** Deterministic serialisation with sorted keys, for comparing two objects. */
function stable(v: Json | undefined): string {
  if (v === undefined) return 'undefined';
  if (Array.isArray(v)) return `[${v.map(stable).join(',')}]`;
  if (isObject(v))
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stable(v[k])}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

const BOOKKEEPING_META = new Set([
  'finalizers',
  'managedFields',
  'resourceVersion',
  'generation',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
]);

/**
 * An UPDATE that only removes finalizers (or touches server-maintained metadata/status) changes nothing
 * the agent runtime reads; anyone with RBAC for it may do it, so a stuck deletion can be finished.
 */
function onlyFinalizerRemoval(oldObj: KubeObject | null, newObj: KubeObject | null): boolean {
  if (!oldObj || !newObj) return false;
  const strip = (o: KubeObject): JsonObject => {
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(o)) {
      if (k === 'status') continue;
      if (k === 'metadata' && isObject(v)) {
        const m: JsonObject = {};
        for (const [mk, mv] of Object.entries(v)) if (!BOOKKEEPING_META.has(mk)) m[mk] = mv;
        out[k] = m;
      } else out[k] = v;
    }
    return out;
  };
  if (stable(strip(oldObj)) !== stable(strip(newObj))) return false;
  const fin = (o: KubeObject): Json[] => {
    const f = field(meta(o), 'finalizers');
    return Array.isArray(f) ? f : [];
  };
  const before = new Set(fin(oldObj).map((x) => stable(x)));
  return fin(newObj).every((x) => before.has(stable(x)));
}

interface HeaderProblem {
  reason: string;
  why: string;
}

function headerProblem(v: Json, identityLower: string, retrieval: boolean): HeaderProblem | undefined {
  if (typeof v !== 'string') return { reason: 'header-not-string', why: 'entries must be strings' };
  if (v.trim() === '') return { reason: 'header-empty', why: 'empty header name' };
  if (v.includes('*')) return { reason: 'header-wildcard', why: 'wildcards are never allowed' };
  if (!TOKEN.test(v))
    return { reason: 'header-not-token', why: 'not an RFC 9110 field name (token); it could never match' };
  const lower = v.toLowerCase();
  if (CREDENTIAL_HEADERS.has(lower))
    return { reason: 'header-credential', why: 'credential headers must never be propagated to tools' };
  if (lower === 'x-user-id')
    return {
      reason: 'header-user-id',
      why: 'X-User-Id is consumed by kagent and never propagated as retrieval authority',
    };
  if (lower === identityLower)
    return retrieval
      ? undefined
      : {
          reason: 'identity-header-non-retrieval',
          why: 'X-Fgentic-Identity may be propagated only by a retrieval Agent to knowledge-retrieval',
        };
  return { reason: 'header-not-allowed', why: 'only X-Fgentic-Identity may be propagated' };
}

/** Explains, entry by entry, why an allowedHeaders list is not acceptable. */
function explainHeaders(f: Findings, path: string, value: Json, cfg: RulesConfig, retrieval: boolean): void {
  if (!retrieval)
    f.deny(
      'allowed-headers-forbidden',
      path,
      'allowedHeaders is forbidden on every Agent except the rendered retrieval Agent',
    );
  if (!Array.isArray(value)) {
    f.deny('kagent-schema', path, 'must be of type array');
    return;
  }
  const identityLower = cfg.identityHeader.toLowerCase();
  let n = 0;
  const seen = new Set<string>();
  for (let i = 0; i < value.length && n < MAX_ENTRY_FINDINGS; i++) {
    const entry = value[i] as Json;
    const shown = typeof entry === 'string' ? JSON.stringify(entry.slice(0, 64)) : typeof entry;
    const lower = typeof entry === 'string' ? entry.trim().toLowerCase() : undefined;
    const p =
      lower !== undefined && lower !== '' && seen.has(lower)
        ? { reason: 'header-duplicate', why: 'duplicate (names are case-insensitive)' }
        : headerProblem(entry, identityLower, retrieval);
    if (lower !== undefined) seen.add(lower);
    if (p) {
      f.deny(p.reason, `${path}[${i}]`, `${shown}: ${p.why}`);
      n++;
    }
  }
  if (retrieval && value.length !== 1 && n === 0)
    f.deny(
      'allowed-headers-count',
      path,
      `the retrieval Agent must list exactly one header, ${cfg.identityHeader}`,
    );
}

/**
 * Calls `visit` for every key of an object tree whose lower-cased name is `wanted`, with its dotted
 * path. Paths are only built for matches (this runs on every reviewed Agent).
 */
function findKeys(root: Json, wanted: string, visit: (key: string, value: Json, path: string) => void): void {
  const segments: string[] = [];
  const pathOf = () => segments.join('').replace(/^\./, '');
  const walk = (node: Json): void => {
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const v = node[i] as Json;
        if (typeof v !== 'object' || v === null) continue;
        segments.push(`[${i}]`);
        walk(v);
        segments.pop();
      }
      return;
    }
    if (!isObject(node)) return;
    for (const k in node) {
      const v = node[k] as Json;
      if (k.length === wanted.length && k.toLowerCase() === wanted) {
        segments.push(`.${k}`);
        visit(k, v, pathOf());
        segments.pop();
      }
      if (typeof v === 'object' && v !== null) {
        segments.push(`.${k}`);
        walk(v);
        segments.pop();
      }
    }
  };
  walk(root);
}

function arr(v: Json | undefined): Json[] | undefined {
  return Array.isArray(v) ? v : undefined;
}

/** The namespace a tool reference resolves in (kagent: omitted or empty means the Agent's own). */
function refNamespace(ref: JsonObject, agentNamespace: string): string {
  const ns = str(ref, 'namespace');
  return ns === undefined || ns === '' ? agentNamespace : ns;
}

interface Ctx {
  f: Findings;
  cfg: RulesConfig;
  view: ClusterView;
  ns: string;
  name: string;
}

/** The reproduced CRD layer (schema + CEL of kagent v0.9.11 v1alpha2); kagent's own messages. */
function checkCrdV1alpha2(c: Ctx, spec: JsonObject): void {
  const { f } = c;
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
    const tt = field(t, 'type');
    const hasMcp = Object.hasOwn(t, 'mcpServer');
    const hasAgent = Object.hasOwn(t, 'agent');
    if (tt === undefined) {
      if (hasMcp || hasAgent)
        f.deny('kagent-schema', `${p}.type`, 'no such key: type (tools[].type has no default)');
    } else if (tt !== 'McpServer' && tt !== 'Agent') {
      f.deny(
        'kagent-schema',
        `${p}.type`,
        `Unsupported value: ${JSON.stringify(tt)}: supported values: "McpServer", "Agent"`,
      );
    } else {
      if (hasMcp && tt !== 'McpServer')
        f.deny('kagent-schema', p, 'type.mcpServer must be nil if the type is not McpServer');
      if (!hasMcp && tt === 'McpServer')
        f.deny('kagent-schema', p, 'type.mcpServer must be specified for McpServer filter.type');
      if (hasAgent && tt !== 'Agent')
        f.deny('kagent-schema', p, 'type.agent must be nil if the type is not Agent');
      if (!hasAgent && tt === 'Agent')
        f.deny('kagent-schema', p, 'type.agent must be specified for Agent filter.type');
    }
    const mcp = field(t, 'mcpServer');
    if (hasMcp && !isObject(mcp)) f.deny('kagent-schema', `${p}.mcpServer`, 'must be of type object');
    if (isObject(mcp)) {
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
    const hf = field(t, 'headersFrom');
    if (hf !== undefined) {
      if (!Array.isArray(hf)) f.deny('kagent-schema', `${p}.headersFrom`, 'must be of type array');
      else
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
  });
}

/** A static header named like the identity header would stand in for the projector's. */
function checkStaticIdentityHeader(
  f: Findings,
  headersFrom: Json | undefined,
  path: string,
  cfg: RulesConfig,
): void {
  const lower = cfg.identityHeader.toLowerCase();
  arr(headersFrom)?.forEach((h, j) => {
    const n = str(h, 'name');
    if (n !== undefined && n.trim().toLowerCase() === lower)
      f.deny(
        'identity-header-static',
        `${path}[${j}].name`,
        `a static ${cfg.identityHeader} header would forge the projected identity`,
      );
  });
}

/** Warnings for what kagent's controller or runtime would only report (or silently do) later. */
function controllerWarnings(c: Ctx, decl: JsonObject): void {
  const { f, ns } = c;
  const p = 'spec.declarative';
  if (!Object.hasOwn(decl, 'systemMessage') && !Object.hasOwn(decl, 'systemMessageFrom'))
    f.warn(
      'kagent-no-system-message',
      p,
      'at least one system message source (SystemMessage or SystemMessageFrom) must be specified',
    );
  const mc = field(decl, 'modelConfig');
  if (typeof mc !== 'string' || mc === '')
    f.warn(
      'kagent-no-model-config',
      `${p}.modelConfig`,
      'no modelConfig: the controller will fail to resolve one',
    );
  const runtime = field(decl, 'runtime');
  if (runtime === undefined)
    f.warn(
      'kagent-runtime-default',
      `${p}.runtime`,
      'runtime unset: python on kagent v0.9.11 but go from v0.10',
    );
  if (runtime === 'go') {
    if (decl['executeCodeBlocks'] === true)
      f.warn('kagent-unsupported-feature', `${p}.executeCodeBlocks`, 'not supported by the go runtime');
    if (isObject(decl['context']) && Object.hasOwn(decl['context'], 'compaction'))
      f.warn('kagent-unsupported-feature', `${p}.context.compaction`, 'not supported by the go runtime');
  }
  const tools = arr(field(decl, 'tools')) ?? [];
  const gated = new Set<string>();
  for (const t of tools)
    for (const n of arr(field(field(t, 'mcpServer'), 'requireApproval')) ?? [])
      if (typeof n === 'string') gated.add(n);
  tools.forEach((t, i) => {
    const mcp = field(t, 'mcpServer');
    if (!isObject(mcp)) return;
    const mp = `${p}.tools[${i}].mcpServer`;
    const kind = str(mcp, 'kind') ?? '';
    const group = str(mcp, 'apiGroup') ?? '';
    const kagentKind =
      (kind === 'MCPServer' || kind === 'RemoteMCPServer') && (group === '' || group === KAGENT_GROUP);
    const serviceKind = kind === 'Service' && (group === '' || group === 'core');
    if (kind === '' && group === '')
      f.warn('kagent-kind-empty', mp, 'empty kind resolves to a kmcp MCPServer, not a RemoteMCPServer');
    else if (!kagentKind && !serviceKind)
      f.warn('kagent-unknown-server-type', mp, `unknown tool server type: ${kind}.${group}`.slice(0, 200));
    const target = refNamespace(mcp, ns);
    if (target !== ns) {
      if (kind === 'RemoteMCPServer')
        f.warn(
          'kagent-cross-namespace',
          `${mp}.namespace`,
          `cross-namespace reference to RemoteMCPServer ${target}/${str(mcp, 'name') ?? ''} is allowed only if its spec.allowedNamespaces admits ${ns}`,
        );
      else
        f.warn(
          'kagent-cross-namespace',
          `${mp}.namespace`,
          `${kind || 'MCPServer'} does not support cross-namespace references`,
        );
    }
    const tn = arr(field(mcp, 'toolNames'));
    if (!tn || tn.length === 0)
      f.warn('kagent-all-tools', `${mp}.toolNames`, 'empty toolNames exposes every tool of the server');
    const own = new Set(arr(field(mcp, 'requireApproval')) ?? []);
    for (const n of tn ?? [])
      if (typeof n === 'string' && gated.has(n) && !own.has(n))
        f.warn(
          'kagent-approval-global',
          `${mp}.toolNames`,
          `tool ${JSON.stringify(n)} is gated by requireApproval on another server; the gate applies to every server`,
        );
  });
}

function retrievalTargetNamespace(c: Ctx): string | undefined {
  const platform = c.view.platform();
  const ns = str(field(field(platform, 'spec'), 'namespaces'), 'kagent');
  return ns && ns !== '' ? ns : undefined;
}

/** Content rules for a rendered retrieval Agent (v1alpha2). */
function checkRetrievalAgent(c: Ctx, obj: KubeObject, spec: JsonObject): void {
  const { f, cfg, view, ns, name } = c;
  if (!view.retrievalAgent(ns, name))
    f.deny('retrieval-agent-undeclared', 'metadata', `no RetrievalAgent ${ns}/${name} declares this Agent`);
  if (!hasExactRetrievalLabels(obj))
    f.deny(
      'retrieval-agent-labels',
      'metadata.labels',
      `a retrieval Agent must carry ${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE} and ${ROLE_LABEL}=${ROLE_VALUE}`,
    );
  const owners = arr(field(meta(obj), 'ownerReferences')) ?? [];
  const raOwners = owners.filter((o) => str(o, 'kind') === 'RetrievalAgent');
  if (raOwners.length === 0)
    f.warn(
      'retrieval-agent-owner-ref',
      'metadata.ownerReferences',
      'no owner reference to its RetrievalAgent',
    );
  for (const o of raOwners)
    if (str(o, 'name') !== name || !(str(o, 'apiVersion') ?? '').startsWith(`${RETRIEVAL_GROUP}/`))
      f.deny(
        'retrieval-agent-owner-ref',
        'metadata.ownerReferences',
        `the owner RetrievalAgent must be ${RETRIEVAL_GROUP} ${ns}/${name}`,
      );
  if (spec['type'] !== 'Declarative')
    f.deny('retrieval-agent-type', 'spec.type', 'a retrieval Agent must set type: Declarative');
  if (Object.hasOwn(spec, 'byo'))
    f.deny('retrieval-agent-type', 'spec.byo', 'a retrieval Agent must not set spec.byo');
  const decl = field(spec, 'declarative');
  if (!isObject(decl)) return;
  if (decl['runtime'] !== 'python')
    f.deny(
      'retrieval-agent-runtime',
      'spec.declarative.runtime',
      'a retrieval Agent must set runtime: python explicitly (the header and HITL semantics are pinned to it; v0.10 defaults to go)',
    );
  const env = arr(field(field(decl, 'deployment'), 'env')) ?? [];
  env.forEach((e, i) => {
    const n = str(e, 'name');
    if (n === 'KAGENT_PROPAGATE_TOKEN' || n === 'STS_WELL_KNOWN_URI')
      f.deny(
        'retrieval-agent-token-propagation',
        `spec.declarative.deployment.env[${i}]`,
        `${n} would propagate an Authorization header to the retrieval server`,
      );
  });
  const tools = arr(field(decl, 'tools')) ?? [];
  tools.forEach((t, i) => {
    const m = field(t, 'mcpServer');
    if (isObject(m) && Object.hasOwn(m, 'requireApproval'))
      f.deny(
        'require-approval-retrieval',
        `spec.declarative.tools[${i}].mcpServer.requireApproval`,
        'requireApproval is forbidden on a retrieval Agent: the HITL resume turn reuses stale identity headers',
      );
  });
  if (tools.length !== 1) {
    f.deny(
      'retrieval-agent-tools',
      'spec.declarative.tools',
      `a retrieval Agent must have exactly one tool entry, found ${tools.length}`,
    );
    return;
  }
  const t = tools[0];
  const p = 'spec.declarative.tools[0]';
  if (str(t, 'type') !== 'McpServer' || (isObject(t) && Object.hasOwn(t, 'agent')))
    f.deny('retrieval-tool-target', `${p}.type`, 'the retrieval tool entry must be type McpServer');
  const mcp = field(t, 'mcpServer');
  if (!isObject(mcp)) return;
  const mp = `${p}.mcpServer`;
  if (mcp['kind'] !== 'RemoteMCPServer')
    f.deny('retrieval-tool-target', `${mp}.kind`, 'must be exactly RemoteMCPServer');
  if (mcp['apiGroup'] !== KAGENT_GROUP)
    f.deny('retrieval-tool-target', `${mp}.apiGroup`, `must be exactly ${KAGENT_GROUP}`);
  if (mcp['name'] !== cfg.retrievalServerName)
    f.deny('retrieval-tool-target', `${mp}.name`, `must be exactly ${cfg.retrievalServerName}`);
  const want = retrievalTargetNamespace(c);
  const got = refNamespace(mcp, ns);
  if (want === undefined)
    f.deny(
      'platform-missing',
      `${mp}.namespace`,
      'no RetrievalPlatform "default" names the kagent namespace',
    );
  else if (got !== want)
    f.deny(
      'retrieval-tool-target',
      `${mp}.namespace`,
      `resolves to namespace ${got}; the retrieval RemoteMCPServer lives in ${want}`,
    );
  const tn = field(mcp, 'toolNames');
  if (!Array.isArray(tn) || tn.length !== 1 || tn[0] !== cfg.retrievalTool)
    f.deny('retrieval-tool-names', `${mp}.toolNames`, `must be exactly [${cfg.retrievalTool}]`);
}

function isRetrievalServerRef(ref: Json | undefined, cfg: RulesConfig): boolean {
  return str(ref, 'name') === cfg.retrievalServerName;
}

function checkV1alpha2(c: Ctx, obj: KubeObject, retrieval: boolean): void {
  const { f, cfg } = c;
  const spec = field(obj, 'spec');
  if (!isObject(spec)) {
    f.deny('kagent-schema', 'spec', 'spec must be an object');
    return;
  }
  checkCrdV1alpha2(c, spec);
  const decl = field(spec, 'declarative');
  const tools = arr(field(decl, 'tools')) ?? [];
  // allowedHeaders anywhere: only the exact retrieval position may hold it, and only the identity header.
  const body: JsonObject = {};
  for (const [k, v] of Object.entries(obj))
    if (k !== 'metadata' && k !== 'apiVersion' && k !== 'kind') body[k] = v;
  findKeys(body, 'allowedheaders', (key, value, path) => {
    const exact =
      key === 'allowedHeaders' && /^spec\.declarative\.tools\[\d+\]\.mcpServer\.allowedHeaders$/.test(path);
    if (!exact) {
      f.deny(
        'allowed-headers-position',
        path,
        'allowedHeaders is only a field of tools[].mcpServer (unknown field here) and is forbidden',
      );
      return;
    }
    if (!retrieval) {
      explainHeaders(f, path, value, cfg, false);
      return;
    }
    if (path !== 'spec.declarative.tools[0].mcpServer.allowedHeaders') {
      f.deny('allowed-headers-target', path, 'only the retrieval tool entry may propagate a header');
      return;
    }
    explainHeaders(f, path, value, cfg, true);
  });
  tools.forEach((t, i) => {
    checkStaticIdentityHeader(f, field(t, 'headersFrom'), `spec.declarative.tools[${i}].headersFrom`, cfg);
  });
  if (retrieval) {
    checkRetrievalAgent(c, obj, spec);
  } else {
    tools.forEach((t, i) => {
      if (isRetrievalServerRef(field(t, 'mcpServer'), cfg))
        f.deny(
          'retrieval-server-reserved',
          `spec.declarative.tools[${i}].mcpServer.name`,
          `${cfg.retrievalServerName} may be referenced only by retrieval Agents rendered from a RetrievalAgent`,
        );
    });
    tools.forEach((t, i) => {
      const ref = field(t, 'agent');
      if (!isObject(ref)) return;
      const refNs = refNamespace(ref, c.ns);
      const refName = str(ref, 'name') ?? '';
      if (c.view.retrievalAgent(refNs, refName) || claimsRetrieval(c.view.agent(refNs, refName) ?? null))
        f.deny(
          'retrieval-agent-as-tool',
          `spec.declarative.tools[${i}].agent`,
          `${refNs}/${refName} is a retrieval Agent; it is reached only through the gateway's identity projection, never as another Agent's tool`,
        );
    });
    if (spec['type'] === 'BYO' && Object.hasOwn(spec, 'declarative'))
      f.deny(
        'byo-declarative',
        'spec.declarative',
        'spec.declarative on a BYO Agent is silently ignored by kagent; remove it',
      );
  }
  if (isObject(decl) && (spec['type'] ?? 'Declarative') === 'Declarative') controllerWarnings(c, decl);
}

/** v1alpha1 (served, not stored, no conversion): different layout, no allowedHeaders field at all. */
function checkV1alpha1(c: Ctx, obj: KubeObject, retrieval: boolean): void {
  const { f, cfg } = c;
  f.warn('kagent-v1alpha1', 'apiVersion', 'kagent.dev/v1alpha1 is served without conversion; use v1alpha2');
  if (retrieval)
    f.deny(
      'retrieval-agent-version',
      'apiVersion',
      'a retrieval Agent must be written as kagent.dev/v1alpha2',
    );
  const spec = field(obj, 'spec');
  if (!isObject(spec)) {
    f.deny('kagent-schema', 'spec', 'spec must be an object');
    return;
  }
  const body: JsonObject = {};
  for (const [k, v] of Object.entries(obj))
    if (k !== 'metadata' && k !== 'apiVersion' && k !== 'kind') body[k] = v;
  findKeys(body, 'allowedheaders', (_k, _v, path) => {
    f.deny('allowed-headers-position', path, 'allowedHeaders does not exist in v1alpha1 and is forbidden');
  });
  (arr(field(spec, 'tools')) ?? []).forEach((t, i) => {
    const server = str(field(t, 'mcpServer'), 'toolServer');
    if (server !== undefined && server.split('/').pop() === cfg.retrievalServerName)
      f.deny(
        'retrieval-server-reserved',
        `spec.tools[${i}].mcpServer.toolServer`,
        `${cfg.retrievalServerName} may be referenced only by retrieval Agents rendered from a RetrievalAgent`,
      );
  });
}

export function reviewAgent(input: AdmissionInput, view: ClusterView, cfg: RulesConfig): Verdict {
  const f = new Findings();
  const { operation, object: obj, oldObject: old } = input;
  const version = input.kind.version;
  if (version !== 'v1alpha1' && version !== 'v1alpha2') {
    f.deny(
      'agent-version-unsupported',
      'apiVersion',
      `kagent.dev/${version} Agents are not supported by this webhook`,
    );
    return f;
  }
  const ns = input.namespace || namespaceOf(obj ?? old);
  const name = input.name || nameOf(obj ?? old);
  const c: Ctx = { f, cfg, view, ns, name };
  const declared = view.retrievalAgent(ns, name) !== undefined;
  const retrieval = declared || claimsRetrieval(obj) || claimsRetrieval(old);
  if (retrieval && input.username !== cfg.controllerUser) {
    if (operation === 'DELETE' && cfg.deleteUsers.includes(input.username)) return f;
    if (operation === 'UPDATE' && onlyFinalizerRemoval(old, obj)) return f;
    const why = declared
      ? `declared by RetrievalAgent ${ns}/${name}`
      : 'labelled as a rendered retrieval Agent';
    f.deny(
      'retrieval-agent-owner',
      'metadata',
      `Agent ${ns}/${name} is a retrieval Agent (${why}); only ${cfg.controllerUser} may ${operation.toLowerCase()} it`,
    );
    return f;
  }
  if (operation === 'DELETE' || operation === 'CONNECT') return f;
  if (!obj) {
    f.deny('malformed', 'object', `${operation} without an object`);
    return f;
  }
  if (version === 'v1alpha1') checkV1alpha1(c, obj, retrieval);
  else checkV1alpha2(c, obj, retrieval);
  return f;
}

/**
 * RemoteMCPServers: a static X-Fgentic-Identity header is forbidden everywhere, and the retrieval server
 * itself (which receives the identity header) may only be changed by the reconciler.
 */
export function reviewRemoteMcpServer(input: AdmissionInput, view: ClusterView, cfg: RulesConfig): Verdict {
  const f = new Findings();
  const obj = input.object;
  const ns = input.namespace || namespaceOf(obj ?? input.oldObject);
  const name = input.name || nameOf(obj ?? input.oldObject);
  const platformNs = str(field(field(view.platform(), 'spec'), 'namespaces'), 'kagent');
  const protectedServer = name === cfg.retrievalServerName && (platformNs === undefined || platformNs === ns);
  if (protectedServer && input.username !== cfg.controllerUser) {
    if (input.operation === 'DELETE' && cfg.deleteUsers.includes(input.username)) return f;
    if (input.operation === 'UPDATE' && onlyFinalizerRemoval(input.oldObject, obj)) return f;
    f.deny(
      'retrieval-server-owner',
      'metadata',
      `RemoteMCPServer ${ns}/${name} receives the projected identity; only ${cfg.controllerUser} may ${input.operation.toLowerCase()} it`,
    );
    return f;
  }
  if (input.operation === 'DELETE' || input.operation === 'CONNECT') return f;
  if (!obj) {
    f.deny('malformed', 'object', `${input.operation} without an object`);
    return f;
  }
  const spec = field(obj, 'spec');
  if (!isObject(spec)) {
    f.deny('kagent-schema', 'spec', 'spec must be an object');
    return f;
  }
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
  checkStaticIdentityHeader(f, field(spec, 'headersFrom'), 'spec.headersFrom', cfg);
  return f;
}
