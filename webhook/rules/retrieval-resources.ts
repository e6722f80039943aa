/**
 * Rules for our own resources (retrieval.fgentic.dev/v1alpha1): the per-field rules of rules/ (the
 * same ones the CRD schema is generated from, so a review refuses what the API server would, with a
 * reason code), and the cross-object rules the CRDs cannot express because they look at other
 * objects (unique room IDs and partner keys, group collisions). Pure.
 */
import {
  agentLimit,
  checkAgent,
  checkPartner,
  checkPlatform,
  checkRoom,
  claimedByOthers,
  groupCollisions,
} from '../../rules/index.ts';
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

/** Names of the other resources in `list` (the one under review excluded). */
function others(list: readonly KubeObject[], name: string): string[] {
  return list.filter((o) => !sameIdentity(o, name)).map(nameOf);
}

function reviewRoom(f: Findings, obj: KubeObject, view: ClusterView): void {
  if (!specOf(f, obj)) return;
  const problems = checkRoom(obj as { spec?: unknown });
  f.add(problems);
  const roomId = str(field(obj, 'spec'), 'roomId');
  if (roomId !== undefined && !problems.some((p) => p.path === 'spec.roomId'))
    f.add(
      claimedByOthers(
        'room-duplicate',
        'spec.roomId',
        others(view.roomsWithId(roomId), nameOf(obj)).map((n) => `RetrievalRoom ${n}`),
      ),
    );
}

function reviewPartner(f: Findings, obj: KubeObject, view: ClusterView): void {
  const spec = specOf(f, obj);
  if (!spec) return;
  const problems = checkPartner(obj as { spec?: unknown });
  f.add(problems);
  const [issuer, audience, azp] = ['issuer', 'audience', 'azp'].map((k) => str(spec, k) ?? '') as [
    string,
    string,
    string,
  ];
  f.add(
    claimedByOthers(
      'partner-duplicate',
      'spec',
      others(view.partnersWithKey(issuer, audience, azp), nameOf(obj)).map((n) => `PartnerClient ${n}`),
    ),
  );
  const groups = spec['groups'];
  if (Array.isArray(groups) && !problems.some((p) => p.path.startsWith('spec.groups')))
    f.add(groupCollisions(groups, localGroups(view), 'spec.groups', 'the RetrievalPlatform (localGroups)'));
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
  if (!specOf(f, obj)) {
    if (nameOf(obj) !== 'default')
      f.deny('platform-name', 'metadata.name', 'the RetrievalPlatform must be named default');
    return;
  }
  const problems = checkPlatform(obj as { metadata?: { name?: unknown }; spec?: unknown });
  f.add(problems);
  const lg = field(field(obj, 'spec'), 'localGroups');
  if (!Array.isArray(lg) || problems.some((p) => p.path.startsWith('spec.localGroups'))) return;
  for (const p of view.partners()) {
    const groups = field(field(p, 'spec'), 'groups');
    const theirs = new Set(Array.isArray(groups) ? groups.filter((g): g is string => typeof g === 'string') : []);
    f.add(groupCollisions(lg, theirs, 'spec.localGroups', `PartnerClient ${nameOf(p)}`));
  }
}

function reviewRetrievalAgent(f: Findings, obj: KubeObject, view: ClusterView, input: AdmissionInput): void {
  const ns = input.namespace || namespaceOf(obj);
  const name = input.name || nameOf(obj);
  if (!specOf(f, obj)) return;
  const metadata = field(obj, 'metadata');
  f.add(
    checkAgent({
      metadata: { namespace: ns, name: str(metadata, 'name') ?? name },
      spec: field(obj, 'spec'),
    }),
  );
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
  const uid = str(metadata, 'uid');
  const otherUid = str(field(other, 'metadata'), 'uid');
  if (input.operation === 'CREATE' && other && uid !== undefined && otherUid !== undefined && uid !== otherUid)
    f.deny('retrieval-agent-duplicate', 'metadata.name', `RetrievalAgent ${ns}/${name} already exists`);
  // A new RetrievalAgent past the bound both servers' files hold is refused here, not left for the
  // render to refuse (rules/cross-object.ts); an update of an existing one never is.
  if (input.operation === 'CREATE') f.add(agentLimit(view.retrievalAgentCount() + (other ? 0 : 1), 'metadata.name'));
}

export function reviewRetrievalResource(input: AdmissionInput, view: ClusterView, _cfg: RulesConfig): Verdict {
  const f = new Findings();
  if (input.kind.version !== 'v1alpha1') {
    f.deny('version-unsupported', 'apiVersion', `retrieval.fgentic.dev/${input.kind.version} is not supported`);
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
      f.deny('kind-unsupported', 'kind', `retrieval.fgentic.dev ${input.kind.kind} is not handled by this webhook`);
  }
  return f;
}
