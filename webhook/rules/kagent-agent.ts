/**
 * Admission rules for kagent.dev Agents (v1alpha2, and v1alpha1 which kagent v0.9.11 serves without
 * conversion) and for the retrieval RemoteMCPServer. Pure: the request, the view of the other objects
 * and the configuration in; findings out. These are the security rules; kagent's own schema is
 * reproduced in kagent-schema.ts and the advisory warnings are in kagent-advice.ts.
 *
 * ADR 0017 decision 10 (docs/decisions.md#adr-10): only the rendered retrieval Agent may carry `allowedHeaders`, exactly
 * `[X-Fgentic-Identity]`, on its single tool entry for the exact `knowledge-retrieval` RemoteMCPServer;
 * `requireApproval` stays absent there (the HITL resume turn skips the header refresh).
 */
import { IDENTITY_HEADER_NAME, RETRIEVAL_SERVER } from '../../rules/index.ts';
import { controllerWarnings } from './kagent-advice.ts';
import { arr, type Ctx, findKeys, refNamespace, settledByOwnership, writtenObject } from './kagent-common.ts';
import { checkCrdV1alpha2, checkRemoteMcpServerSchema } from './kagent-schema.ts';
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
          why: `${IDENTITY_HEADER_NAME} may be propagated only by a retrieval Agent to ${RETRIEVAL_SERVER}`,
        };
  return { reason: 'header-not-allowed', why: `only ${IDENTITY_HEADER_NAME} may be propagated` };
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
    f.deny('allowed-headers-count', path, `the retrieval Agent must list exactly one header, ${cfg.identityHeader}`);
}

/** A static header named like the identity header would stand in for the projector's. */
function checkStaticIdentityHeader(f: Findings, headersFrom: Json | undefined, path: string, cfg: RulesConfig): void {
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

function retrievalTargetNamespace(c: Ctx): string | undefined {
  const platform = c.view.platform();
  const ns = str(field(field(platform, 'spec'), 'namespaces'), 'kagent');
  return ns && ns !== '' ? ns : undefined;
}

/** Content rules for a rendered retrieval Agent (v1alpha2). */
function checkRetrievalAgent(c: Ctx, obj: KubeObject, spec: JsonObject): void {
  const { f } = c;
  checkRetrievalOwnership(c, obj);
  if (spec['type'] !== 'Declarative')
    f.deny('retrieval-agent-type', 'spec.type', 'a retrieval Agent must set type: Declarative');
  if (Object.hasOwn(spec, 'byo')) f.deny('retrieval-agent-type', 'spec.byo', 'a retrieval Agent must not set spec.byo');
  const decl = field(spec, 'declarative');
  if (!isObject(decl)) return;
  checkRetrievalRuntime(f, decl);
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
  checkRetrievalTool(c, tools[0]);
}

/** A retrieval Agent is declared by a RetrievalAgent, labelled as the reconciler's, and owned by it. */
function checkRetrievalOwnership(c: Ctx, obj: KubeObject): void {
  const { f, view, ns, name } = c;
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
    f.warn('retrieval-agent-owner-ref', 'metadata.ownerReferences', 'no owner reference to its RetrievalAgent');
  for (const o of raOwners)
    if (str(o, 'name') !== name || !(str(o, 'apiVersion') ?? '').startsWith(`${RETRIEVAL_GROUP}/`))
      f.deny(
        'retrieval-agent-owner-ref',
        'metadata.ownerReferences',
        `the owner RetrievalAgent must be ${RETRIEVAL_GROUP} ${ns}/${name}`,
      );
}

/** Python, explicitly, and no token propagation: the runtime the header semantics are pinned to. */
function checkRetrievalRuntime(f: Findings, decl: JsonObject): void {
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
}

/** The one tool entry: McpServer on the retrieval RemoteMCPServer, in the platform's kagent namespace. */
function checkRetrievalTool(c: Ctx, t: Json | undefined): void {
  const { f, cfg, ns } = c;
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
    f.deny('platform-missing', `${mp}.namespace`, 'no RetrievalPlatform "default" names the kagent namespace');
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
  for (const [k, v] of Object.entries(obj)) if (k !== 'metadata' && k !== 'apiVersion' && k !== 'kind') body[k] = v;
  findKeys(body, 'allowedheaders', (key, value, path) => {
    const exact = key === 'allowedHeaders' && /^spec\.declarative\.tools\[\d+\]\.mcpServer\.allowedHeaders$/.test(path);
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
    f.deny('retrieval-agent-version', 'apiVersion', 'a retrieval Agent must be written as kagent.dev/v1alpha2');
  const spec = field(obj, 'spec');
  if (!isObject(spec)) {
    f.deny('kagent-schema', 'spec', 'spec must be an object');
    return;
  }
  const body: JsonObject = {};
  for (const [k, v] of Object.entries(obj)) if (k !== 'metadata' && k !== 'apiVersion' && k !== 'kind') body[k] = v;
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
  const { object: obj, oldObject: old } = input;
  const version = input.kind.version;
  if (version !== 'v1alpha1' && version !== 'v1alpha2') {
    f.deny('agent-version-unsupported', 'apiVersion', `kagent.dev/${version} Agents are not supported by this webhook`);
    return f;
  }
  const ns = input.namespace || namespaceOf(obj ?? old);
  const name = input.name || nameOf(obj ?? old);
  const c: Ctx = { f, cfg, view, ns, name };
  const declared = view.retrievalAgent(ns, name) !== undefined;
  const retrieval = declared || claimsRetrieval(obj) || claimsRetrieval(old);
  const why = declared ? `declared by RetrievalAgent ${ns}/${name}` : 'labelled as a rendered retrieval Agent';
  if (
    retrieval &&
    settledByOwnership(f, input, cfg, 'retrieval-agent-owner', `Agent ${ns}/${name} is a retrieval Agent (${why})`)
  )
    return f;
  const written = writtenObject(f, input);
  if (!written) return f;
  if (version === 'v1alpha1') checkV1alpha1(c, written, retrieval);
  else checkV1alpha2(c, written, retrieval);
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
  if (
    protectedServer &&
    settledByOwnership(
      f,
      input,
      cfg,
      'retrieval-server-owner',
      `RemoteMCPServer ${ns}/${name} receives the projected identity`,
    )
  )
    return f;
  const written = writtenObject(f, input);
  if (!written) return f;
  const spec = field(written, 'spec');
  if (!isObject(spec)) {
    f.deny('kagent-schema', 'spec', 'spec must be an object');
    return f;
  }
  checkRemoteMcpServerSchema(f, spec);
  checkStaticIdentityHeader(f, field(spec, 'headersFrom'), 'spec.headersFrom', cfg);
  return f;
}
