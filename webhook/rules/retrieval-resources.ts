/**
 * Cross-object rules for our own resources (retrieval.fgentic.dev/v1alpha1) that the CRDs' OpenAPI and
 * CEL cannot express because they look at other objects. Pure.
 */
import {
  isAllowedClassifications,
  isPartnerGroup,
  isRoomId,
  partnerGroupPolicy,
} from '../../contract/index.ts';
import {
  type AdmissionInput,
  type ClusterView,
  Findings,
  field,
  isObject,
  type JsonObject,
  type KubeObject,
  labels,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  nameOf,
  namespaceOf,
  ROLE_LABEL,
  type RulesConfig,
  str,
  type Verdict,
} from './types.ts';

function specOf(f: Findings, obj: KubeObject): JsonObject | undefined {
  const spec = field(obj, 'spec');
  if (!isObject(spec)) {
    f.deny('schema', 'spec', 'spec must be an object');
    return undefined;
  }
  return spec;
}

/** `approved_non_public` only with an agreement reference, and an agreement reference only with it. */
function checkClassifications(f: Findings, spec: JsonObject): void {
  const ac = spec['allowedClassifications'] ?? ['public'];
  if (!isAllowedClassifications(ac)) {
    f.deny(
      'classifications',
      'spec.allowedClassifications',
      'must be ["public"] or exactly ["approved_non_public","public"]',
    );
    return;
  }
  const ref = spec['agreementRef'];
  const hasRef =
    ref !== undefined && ref !== null && ref !== '' && !(isObject(ref) && Object.keys(ref).length === 0);
  if (ac.length === 2 && !hasRef)
    f.deny('agreement-required', 'spec.agreementRef', 'approved_non_public requires an agreementRef');
  if (ac.length === 1 && hasRef)
    f.deny(
      'agreement-unexpected',
      'spec.agreementRef',
      'agreementRef is only valid with approved_non_public',
    );
}

function sameIdentity(a: KubeObject, name: string, namespace = ''): boolean {
  return nameOf(a) === name && namespaceOf(a) === namespace;
}

function localGroups(view: ClusterView): Set<string> {
  const lg = field(field(view.platform(), 'spec'), 'localGroups');
  return new Set(Array.isArray(lg) ? lg.filter((g): g is string => typeof g === 'string') : []);
}

function reviewRoom(f: Findings, obj: KubeObject, view: ClusterView): void {
  const spec = specOf(f, obj);
  if (!spec) return;
  const name = nameOf(obj);
  const roomId = spec['roomId'];
  if (!isRoomId(roomId))
    f.deny('room-id', 'spec.roomId', 'not a Matrix room ID (legacy !opaque:server or v12 form)');
  else
    for (const other of view.roomsWithId(roomId)) {
      if (sameIdentity(other, name)) continue;
      f.deny('room-duplicate', 'spec.roomId', `room ID already declared by RetrievalRoom ${nameOf(other)}`);
      break;
    }
  checkClassifications(f, spec);
}

function reviewPartner(f: Findings, obj: KubeObject, view: ClusterView): void {
  const spec = specOf(f, obj);
  if (!spec) return;
  const name = nameOf(obj);
  const issuer = str(spec, 'issuer') ?? '';
  const audience = str(spec, 'audience') ?? '';
  const azp = str(spec, 'azp') ?? '';
  for (const other of view.partnersWithKey(issuer, audience, azp)) {
    if (sameIdentity(other, name)) continue;
    f.deny(
      'partner-duplicate',
      'spec',
      `(issuer, audience, azp) already mapped by PartnerClient ${nameOf(other)}; the mapping key must be unique`,
    );
    break;
  }
  const policyId = str(spec, 'policyId') ?? '';
  const groups = spec['groups'];
  const locals = localGroups(view);
  if (!Array.isArray(groups) || groups.length < 1 || groups.length > 16)
    f.deny('partner-groups', 'spec.groups', 'must list 1 to 16 groups');
  else {
    const seen = new Set<string>();
    groups.forEach((g, i) => {
      const p = `spec.groups[${i}]`;
      if (!isPartnerGroup(g)) f.deny('partner-groups', p, 'must be partner/<policyId>/<group>');
      else if (partnerGroupPolicy(g) !== policyId)
        f.deny('partner-groups', p, `must start with partner/${policyId}/`);
      else if (seen.has(g)) f.deny('partner-groups', p, 'duplicate group');
      else if (locals.has(g))
        f.deny('group-collision', p, 'collides with a local group of the RetrievalPlatform');
      if (typeof g === 'string') seen.add(g);
    });
  }
  checkClassifications(f, spec);
  const agents = spec['agents'];
  if (Array.isArray(agents))
    agents.forEach((a, i) => {
      const ns = str(a, 'namespace') ?? '';
      const n = str(a, 'name') ?? '';
      const ra = view.retrievalAgent(ns, n);
      if (!ra) f.warn('partner-agent-unknown', `spec.agents[${i}]`, `no RetrievalAgent ${ns}/${n} (yet)`);
      else if (field(field(ra, 'spec'), 'public') !== true)
        f.warn(
          'partner-agent-not-public',
          `spec.agents[${i}]`,
          `RetrievalAgent ${ns}/${n} is not public: no partner route`,
        );
    });
}

function reviewPlatform(f: Findings, obj: KubeObject, view: ClusterView): void {
  if (nameOf(obj) !== 'default')
    f.deny('platform-name', 'metadata.name', 'the RetrievalPlatform must be named default');
  const spec = specOf(f, obj);
  if (!spec) return;
  const lg = spec['localGroups'];
  if (lg === undefined) return;
  if (!Array.isArray(lg)) {
    f.deny('schema', 'spec.localGroups', 'must be an array of strings');
    return;
  }
  const partnerGroups = new Map<string, string>();
  for (const p of view.partners()) {
    const gs = field(field(p, 'spec'), 'groups');
    if (Array.isArray(gs)) for (const g of gs) if (typeof g === 'string') partnerGroups.set(g, nameOf(p));
  }
  const seen = new Set<string>();
  lg.forEach((g, i) => {
    const p = `spec.localGroups[${i}]`;
    if (typeof g !== 'string' || g === '') f.deny('schema', p, 'must be a non-empty string');
    else if (g.startsWith('partner/'))
      f.deny('group-collision', p, 'local groups must not start with partner/');
    else if (partnerGroups.has(g))
      f.deny('group-collision', p, `equals a group of PartnerClient ${partnerGroups.get(g)}`);
    else if (seen.has(g)) f.deny('schema', p, 'duplicate local group');
    if (typeof g === 'string') seen.add(g);
  });
}

function reviewRetrievalAgent(f: Findings, obj: KubeObject, view: ClusterView, input: AdmissionInput): void {
  const ns = input.namespace || namespaceOf(obj);
  const name = input.name || nameOf(obj);
  specOf(f, obj);
  const existing = view.agent(ns, name);
  if (existing) {
    const l = labels(existing);
    if (!Object.hasOwn(l, ROLE_LABEL) || l[MANAGED_BY_LABEL] !== MANAGED_BY_VALUE)
      f.deny(
        'agent-not-managed',
        'metadata.name',
        `kagent Agent ${ns}/${name} already exists and is not managed by fgentic-retrieval; one RetrievalAgent per kagent Agent, and it must not adopt a foreign Agent`,
      );
  }
  const other = view.retrievalAgent(ns, name);
  const uid = str(field(obj, 'metadata'), 'uid');
  const otherUid = str(field(other, 'metadata'), 'uid');
  if (
    input.operation === 'CREATE' &&
    other &&
    uid !== undefined &&
    otherUid !== undefined &&
    uid !== otherUid
  )
    f.deny('retrieval-agent-duplicate', 'metadata.name', `RetrievalAgent ${ns}/${name} already exists`);
}

export function reviewRetrievalResource(
  input: AdmissionInput,
  view: ClusterView,
  _cfg: RulesConfig,
): Verdict {
  const f = new Findings();
  if (input.kind.version !== 'v1alpha1') {
    f.deny(
      'version-unsupported',
      'apiVersion',
      `retrieval.fgentic.dev/${input.kind.version} is not supported`,
    );
    return f;
  }
  if (input.operation === 'DELETE' || input.operation === 'CONNECT') return f;
  const obj = input.object;
  if (!obj) {
    f.deny('malformed', 'object', `${input.operation} without an object`);
    return f;
  }
  switch (input.kind.kind) {
    case 'RetrievalRoom':
      reviewRoom(f, obj, view);
      break;
    case 'PartnerClient':
      reviewPartner(f, obj, view);
      break;
    case 'RetrievalPlatform':
      reviewPlatform(f, obj, view);
      break;
    case 'RetrievalAgent':
      reviewRetrievalAgent(f, obj, view, input);
      break;
    default:
      f.deny(
        'kind-unsupported',
        'kind',
        `retrieval.fgentic.dev ${input.kind.kind} is not handled by this webhook`,
      );
  }
  return f;
}
