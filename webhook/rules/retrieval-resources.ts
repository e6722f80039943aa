/**
 * Rules for our own resources (retrieval.fgentic.dev/v1alpha1): the per-field rules of rules/ (the
 * same ones the CRD schema is generated from, so a review refuses what the API server would, with a
 * reason code), and the cross-object rules the CRDs cannot express because they look at other
 * objects (unique room IDs and partner keys, group collisions). Pure.
 */
import {
  checkBridgeRegexes,
  checkCeiling,
  checkClient,
  checkIssuer,
  checkLocalGroups,
  checkPartnerAgents,
  checkPartnerGroups,
  checkPublicTimeout,
  groupCollision,
  isRoomId,
  isServerName,
} from '../../rules/index.ts';
import { checkLedgerTiming } from '../../rules/ledger.ts';
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
  f.add(checkCeiling(spec['allowedClassifications'], spec['agreementRef']));
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
  f.add(checkClient(spec));
  const groups = spec['groups'];
  const groupProblems = checkPartnerGroups(groups, spec['policyId'], 'spec.groups');
  f.add(groupProblems);
  const clash =
    groupProblems.length === 0 && Array.isArray(groups) && groupCollision(groups, localGroups(view));
  if (clash)
    f.deny(
      'group-collision',
      `spec.groups[${groups.indexOf(clash)}]`,
      'collides with a local group of the RetrievalPlatform',
    );
  f.add(checkCeiling(spec['allowedClassifications'], spec['agreementRef']));
  f.add(checkPartnerAgents(spec['agents'], 'spec.agents'));
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
  f.add(checkPublicTimeout(spec['publicRetrievalTimeoutSeconds'], 'spec.publicRetrievalTimeoutSeconds'));
  f.add(checkLedgerTiming(spec['ledger'], 'spec.ledger'));
  const bridge = field(spec, 'bridge');
  if (isObject(bridge) && !isServerName(str(bridge, 'localServer') ?? ''))
    f.deny('server-name', 'spec.bridge.localServer', 'not a Matrix server name');
  // The projector compiles these; one it refused would deny every request (rules/bridge.ts).
  if (isObject(bridge)) f.add(checkBridgeRegexes(bridge, 'spec.bridge'));
  const jwt = field(spec, 'jwt');
  if (isObject(jwt)) f.add(checkIssuer(jwt['issuer'], 'spec.jwt.issuer'));
  const lg = spec['localGroups'];
  const localProblems = checkLocalGroups(lg, 'spec.localGroups');
  f.add(localProblems);
  if (localProblems.length > 0 || !Array.isArray(lg)) return;
  const locals = new Set(lg as string[]);
  for (const p of view.partners()) {
    const clash = groupCollision(asArray(field(field(p, 'spec'), 'groups')), locals);
    if (clash)
      f.deny(
        'group-collision',
        `spec.localGroups[${lg.indexOf(clash)}]`,
        `equals a group of PartnerClient ${nameOf(p)}`,
      );
  }
}

function asArray(v: unknown): readonly unknown[] {
  return Array.isArray(v) ? v : [];
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
