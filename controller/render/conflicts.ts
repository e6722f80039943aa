/**
 * Validation and conflict detection. A conflicting or invalid resource renders nothing and is reported
 * (it becomes a `Conflict=True` condition); the rest renders normally. Never a partial, permissive config:
 * everything here only removes entries from the registries and routes.
 *
 * The per-resource rules are those of rules/ (the same the CRDs and the webhook apply); what is
 * left here is what needs every resource at once: one platform, unique keys, group collisions.
 */
import {
  agentLimit,
  agentLocalPath,
  agentPublicPath,
  checkAgent,
  checkPartner,
  checkPlatform,
  checkRoom,
  claimedByOthers,
  conflictReason,
  formatProblem,
  groupCollisions,
  normCeiling,
  type Problem,
  PUBLIC_TIMEOUT,
  parseServiceUrl,
  RATE_LIMIT,
  withinAgentLimit,
} from '../../rules/index.ts';
import type { Conflict, OwnKind, PartnerClient, Resources, RetrievalAgent, RetrievalRoom } from '../types.ts';
import { type Agent, cmpStr, type Model, type Partner, type Platform, partnerKey, type Room } from './model.ts';

type Meta = { namespace?: string; name: string };
type Report = (kind: OwnKind, m: Meta, reason: string, message: string) => void;

/** The first problem as a condition message (one cause at a time, as before a fix is applied). */
function firstProblem(problems: readonly Problem[]): string | undefined {
  const p = problems[0];
  return p && formatProblem(p);
}

/** A room's own problem (rules/ `checkRoom`) as its condition message; render/registry-rooms.ts too. */
export function roomProblem(r: RetrievalRoom): string | undefined {
  return firstProblem(checkRoom(r));
}

/**
 * The conflict of a RetrievalRoom whose room ID the rooms named `others` claim too, as `analyse`
 * reports it (render/registry-rooms.ts reports the same, one room at a time).
 */
export function duplicateRoom(others: readonly string[]): { reason: string; message: string } | undefined {
  const p = claimedByOthers(
    'room-duplicate',
    'spec.roomId',
    others.map((n) => `RetrievalRoom ${n}`),
  )[0];
  return p && { reason: conflictReason(p), message: formatProblem(p) };
}

/** Reports a cross-object problem under its condition reason (rules/reasons.ts). */
function reportCross(report: Report, kind: OwnKind, m: Meta, problems: readonly Problem[]): void {
  const p = problems[0];
  if (p) report(kind, m, conflictReason(p), formatProblem(p));
}

export interface Analysis {
  model?: Model;
  conflicts: Conflict[];
}

/** Validate, then resolve the platform, agents, rooms and partners; conflicts are reported, not rendered. */
export function analyse(input: Resources): Analysis {
  const conflicts: Conflict[] = [];
  const report: Report = (kind, m, reason, message) =>
    conflicts.push({
      kind,
      ...(m.namespace !== undefined ? { namespace: m.namespace } : {}),
      name: m.name,
      reason,
      message,
    });
  const chosen = choosePlatform(input, report);
  if (!chosen) {
    const msg = 'no valid RetrievalPlatform "default": nothing is rendered';
    for (const [kind, items] of [
      ['RetrievalAgent', input.agents],
      ['RetrievalRoom', input.rooms],
      ['PartnerClient', input.partners],
    ] as const)
      for (const i of items) report(kind, i.metadata, 'NoPlatform', msg);
    return { conflicts: sortConflicts(conflicts) };
  }
  const { platform, res } = chosen;
  const agents = resolveAgents(input.agents, report);
  const agentIndex = new Map(agents.map((a) => [`${a.namespace}/${a.name}`, a]));
  const rooms = resolveRooms(input.rooms, report);
  const partners = resolvePartners(input.partners, platform, agentIndex, report);
  bindPartners(partners, platform, agentIndex);
  return {
    model: { platform, platformRes: res, agents, rooms, partners },
    conflicts: sortConflicts(conflicts),
  };
}

/**
 * Items that pass `problemsOf`, grouped by `key`; an invalid item is reported `Invalid`, and every
 * item of a key claimed more than once is reported with the cross-object rule `duplicate`
 * (rules/cross-object.ts) and dropped.
 */
function uniqueValid<T extends { metadata: Meta }>(
  items: readonly T[],
  kind: OwnKind,
  problemsOf: (item: T) => readonly Problem[],
  keyOf: (item: T) => string,
  duplicate: { reason: 'room-duplicate' | 'partner-duplicate' | 'agent-duplicate'; path: string },
  report: Report,
): T[] {
  const byKey = new Map<string, T[]>();
  for (const item of items) {
    const problem = firstProblem(problemsOf(item));
    if (problem) report(kind, item.metadata, 'Invalid', problem);
    else byKey.set(keyOf(item), [...(byKey.get(keyOf(item)) ?? []), item]);
  }
  const name = (m: Meta) => `${kind} ${m.namespace ? `${m.namespace}/` : ''}${m.name}`;
  const out: T[] = [];
  for (const list of byKey.values()) {
    if (list.length === 1) out.push(list[0] as T);
    else
      for (const item of list)
        reportCross(
          report,
          kind,
          item.metadata,
          claimedByOthers(
            duplicate.reason,
            duplicate.path,
            list.filter((x) => x !== item).map((x) => name(x.metadata)),
          ),
        );
  }
  return out;
}

/** Exactly one RetrievalPlatform, named default, valid; defaults applied. */
function choosePlatform(
  input: Resources,
  report: Report,
): { platform: Platform; res: Resources['platforms'][number] } | undefined {
  const platforms = input.platforms.filter((p) => {
    if (p.metadata.name === 'default') return true;
    report('RetrievalPlatform', p.metadata, 'InvalidName', 'the RetrievalPlatform must be named default');
    return false;
  });
  if (platforms.length > 1) {
    for (const p of platforms)
      report('RetrievalPlatform', p.metadata, 'Duplicate', 'more than one RetrievalPlatform named default');
    return undefined;
  }
  const p = platforms[0];
  if (!p) return undefined;
  const s = p.spec;
  const problem = firstProblem(checkPlatform(p));
  if (problem) {
    report('RetrievalPlatform', p.metadata, 'Invalid', problem);
    return undefined;
  }
  const gw = s.gateway;
  const platform: Platform = {
    name: p.metadata.name,
    ...(p.metadata.uid ? { uid: p.metadata.uid } : {}),
    spec: s,
    timeout: s.publicRetrievalTimeoutSeconds ?? PUBLIC_TIMEOUT.default,
    a2aBackend: s.a2aBackend ?? 'controller',
    projector: { service: s.projector?.service ?? 'fgentic-projector', port: s.projector?.port ?? 8080 },
    retrieval: {
      service: s.retrieval?.service ?? 'knowledge-retrieval',
      port: s.retrieval?.port ?? 8080,
    },
    proxyPodLabels: gw.proxyPodLabels ?? { 'app.kubernetes.io/name': 'agentgateway-proxy' },
    mcpListener: gw.mcpListener ?? gw.localListener,
    mcpUrl: (gw.mcpUrl ?? `http://${gw.name}.${gw.namespace}.svc.cluster.local:8080`).replace(/\/+$/, ''),
  };
  if (s.jwt) {
    if (s.jwt.jwksUri) {
      const svc = parseServiceUrl(s.jwt.jwksUri);
      if (svc) platform.jwks = svc;
      else report('RetrievalPlatform', p.metadata, 'JwksUnresolved', 'jwt.jwksUri must name an in-cluster Service URL');
    } else if (input.jwksInline) platform.jwks = { inline: input.jwksInline };
    else
      report(
        'RetrievalPlatform',
        p.metadata,
        'JwksUnresolved',
        input.jwksProblem ?? 'the JWKS Secret could not be read',
      );
  }
  return { platform, res: p };
}

/** Creation order, then namespace/name: the order in which RetrievalAgents are kept at the bound. */
function creationOrder(a: RetrievalAgent, b: RetrievalAgent): number {
  const ta = (a.metadata as { creationTimestamp?: string }).creationTimestamp ?? '';
  const tb = (b.metadata as { creationTimestamp?: string }).creationTimestamp ?? '';
  return (
    cmpStr(ta, tb) ||
    cmpStr(a.metadata.namespace ?? '', b.metadata.namespace ?? '') ||
    cmpStr(a.metadata.name, b.metadata.name)
  );
}

/**
 * Valid RetrievalAgents, one per kagent Agent (namespace/name), at most the agent bound, sorted.
 * Past the bound the newest are refused, each with its own `TooManyAgents` conflict; the others
 * are served as before (rules/cross-object.ts `withinAgentLimit`).
 */
function resolveAgents(items: readonly RetrievalAgent[], report: Report): Agent[] {
  const valid = uniqueValid(
    items,
    'RetrievalAgent',
    (a) => checkAgent(a),
    (a) => `${a.metadata.namespace}/${a.metadata.name}`,
    { reason: 'agent-duplicate', path: 'metadata.name' },
    report,
  );
  const { kept, refused } = withinAgentLimit(valid, creationOrder);
  for (const a of refused) reportCross(report, 'RetrievalAgent', a.metadata, agentLimit(valid.length, 'metadata.name'));
  const agents = kept.map((a): Agent => {
    const ns = a.metadata.namespace as string;
    const name = a.metadata.name;
    return {
      namespace: ns,
      name,
      ...(a.metadata.uid ? { uid: a.metadata.uid } : {}),
      res: a,
      rpm: a.spec.rateLimit?.requestsPerMinute ?? RATE_LIMIT.default,
      public: a.spec.public === true,
      localPath: agentLocalPath(ns, name),
      publicPath: agentPublicPath(ns, name),
      partners: [],
    };
  });
  return agents.sort((x, y) => cmpStr(x.namespace, y.namespace) || cmpStr(x.name, y.name));
}

/** Valid RetrievalRooms, one record per exact room ID, sorted by room ID. */
function resolveRooms(items: readonly RetrievalRoom[], report: Report): Room[] {
  return uniqueValid(
    items,
    'RetrievalRoom',
    (r) => checkRoom(r),
    (r) => r.spec.roomId,
    { reason: 'room-duplicate', path: 'spec.roomId' },
    report,
  )
    .map((r) => ({
      name: r.metadata.name,
      res: r,
      roomId: r.spec.roomId,
      classifications: normCeiling(r.spec.allowedClassifications),
    }))
    .sort((x, y) => cmpStr(x.roomId, y.roomId));
}

/** Valid PartnerClients whose groups are not local groups, unique per (issuer, audience, azp), sorted. */
function resolvePartners(
  items: readonly PartnerClient[],
  platform: Platform,
  agentIndex: ReadonlyMap<string, Agent>,
  report: Report,
): Partner[] {
  const localGroups = new Set(platform.spec.localGroups ?? []);
  const valid = items.filter((p) => {
    const invalid = firstProblem(checkPartner(p));
    if (invalid) report('PartnerClient', p.metadata, 'Invalid', invalid);
    const clash = invalid
      ? []
      : groupCollisions(p.spec.groups, localGroups, 'spec.groups', 'the RetrievalPlatform (localGroups)');
    reportCross(report, 'PartnerClient', p.metadata, clash);
    return !invalid && clash.length === 0;
  });
  return uniqueValid(
    valid,
    'PartnerClient',
    () => [],
    partnerKey,
    { reason: 'partner-duplicate', path: 'spec' },
    report,
  )
    .map((p) => ({
      name: p.metadata.name,
      res: p,
      classifications: normCeiling(p.spec.allowedClassifications),
      agents: (p.spec.agents ?? [])
        .filter((r) => agentIndex.has(`${r.namespace}/${r.name}`))
        .map((r) => ({ namespace: r.namespace, name: r.name }))
        .sort((x, y) => cmpStr(x.namespace, y.namespace) || cmpStr(x.name, y.name)),
    }))
    .sort(
      (x, y) =>
        cmpStr(x.res.spec.issuer, y.res.spec.issuer) ||
        cmpStr(x.res.spec.audience, y.res.spec.audience) ||
        cmpStr(x.res.spec.azp, y.res.spec.azp),
    );
}

/** A partner reaches its agents' public routes only with the platform's issuer, JWKS and public listener. */
function bindPartners(partners: readonly Partner[], platform: Platform, agentIndex: ReadonlyMap<string, Agent>) {
  const jwtIssuer = platform.spec.jwt?.issuer;
  if (!platform.jwks || !platform.spec.gateway.publicListener) return;
  for (const p of partners) {
    if (p.res.spec.issuer !== jwtIssuer) continue;
    for (const r of p.agents) agentIndex.get(`${r.namespace}/${r.name}`)?.partners.push(p);
  }
}

function sortConflicts(c: Conflict[]): Conflict[] {
  return c.sort(
    (a, b) =>
      cmpStr(a.kind, b.kind) ||
      cmpStr(a.namespace ?? '', b.namespace ?? '') ||
      cmpStr(a.name, b.name) ||
      cmpStr(a.reason, b.reason),
  );
}
