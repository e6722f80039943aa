/**
 * Validation and conflict detection. A conflicting or invalid resource renders nothing and is reported
 * (it becomes a `Conflict=True` condition); the rest renders normally. Never a partial, permissive config:
 * everything here only removes entries from the registries and routes.
 *
 * The per-resource rules are those of rules/ (the same the CRDs and the webhook apply); what is
 * left here is what needs every resource at once: one platform, unique keys, group collisions.
 */
import { isDns1123Label } from '../../contract/index.ts';
import {
  agentLocalPath,
  agentPublicPath,
  checkBridgeRegexes,
  checkCeiling,
  checkClient,
  checkIssuer,
  checkLocalGroups,
  checkPartnerAgents,
  checkPartnerGroups,
  checkPublicTimeout,
  formatProblem,
  groupCollision,
  isRoomId,
  isServerName,
  normCeiling,
  type Problem,
  PUBLIC_TIMEOUT,
  problem,
} from '../../rules/index.ts';
import { CAPABILITY_MODES, checkLedgerTiming, isCapabilityMode } from '../../rules/ledger.ts';
import type { Conflict, OwnKind, PartnerClient, Resources, RetrievalAgent, RetrievalRoom } from '../types.ts';
import {
  type Agent,
  cmpStr,
  type Model,
  type Partner,
  type Platform,
  partnerKey,
  type Room,
  serviceFromUrl,
} from './model.ts';

type Meta = { namespace?: string; name: string };
type Report = (kind: OwnKind, m: Meta, reason: string, message: string) => void;

/** The first problem as a condition message (one cause at a time, as before a fix is applied). */
function firstProblem(problems: readonly Problem[]): string | undefined {
  const p = problems[0];
  return p && formatProblem(p);
}

function agentProblem(a: RetrievalAgent): string | undefined {
  const s = a.spec ?? ({} as RetrievalAgent['spec']);
  if (!isDns1123Label(a.metadata.namespace ?? '') || !isDns1123Label(a.metadata.name))
    return 'namespace and name must be DNS-1123 labels';
  if (typeof s.modelConfig !== 'string' || s.modelConfig === '') return 'spec.modelConfig is required';
  if (typeof s.systemMessage !== 'string' || s.systemMessage === '') return 'spec.systemMessage is required';
  if (!s.mcpApiKeySecretRef?.name || !s.mcpApiKeySecretRef?.key) return 'spec.mcpApiKeySecretRef is required';
  const rpm = s.rateLimit?.requestsPerMinute ?? 60;
  if (!Number.isInteger(rpm) || rpm < 1 || rpm > 10000) return 'rateLimit.requestsPerMinute must be 1-10000';
  return undefined;
}

/** The conflict of RetrievalRooms that claim the same room ID (render/registry-rooms.ts reports it too). */
export function duplicateRoom(n: number, roomId: string): { reason: string; message: string } {
  return { reason: 'DuplicateRoom', message: `${n} RetrievalRooms claim room ${roomId}` };
}

export function roomProblem(r: RetrievalRoom): string | undefined {
  const s = r.spec ?? ({} as RetrievalRoom['spec']);
  return firstProblem([
    ...(isRoomId(s.roomId) ? [] : [problem('room-id', 'spec.roomId', 'not a Matrix room ID')]),
    ...checkCeiling(s.allowedClassifications, s.agreementRef),
  ]);
}

function partnerProblem(p: PartnerClient): string | undefined {
  const s = p.spec;
  if (!s) return 'spec is required';
  return firstProblem([
    ...checkClient(s),
    ...checkPartnerGroups(s.groups, s.policyId, 'spec.groups'),
    ...checkPartnerAgents(s.agents, 'spec.agents'),
    ...checkCeiling(s.allowedClassifications, s.agreementRef),
  ]);
}

function platformProblem(s: Resources['platforms'][number]['spec']): string | undefined {
  if (!s?.gateway?.localListener) return 'gateway.localListener is required';
  return firstProblem([
    ...checkPublicTimeout(s.publicRetrievalTimeoutSeconds, 'spec.publicRetrievalTimeoutSeconds'),
    ...checkLocalGroups(s.localGroups, 'spec.localGroups'),
    ...checkBridgeRegexes(s.bridge, 'spec.bridge'),
    ...(isServerName(s.bridge?.localServer ?? '')
      ? []
      : [problem('server-name', 'spec.bridge.localServer', 'not a Matrix server name')]),
    ...(s.jwt ? checkIssuer(s.jwt.issuer, 'spec.jwt.issuer') : []),
    ...(s.capability === undefined || isCapabilityMode(s.capability)
      ? []
      : [problem('capability', 'spec.capability', `must be ${CAPABILITY_MODES.join(' or ')}`)]),
    ...checkLedgerTiming(s.ledger, 'spec.ledger'),
  ]);
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
 * Items that pass `problemOf`, grouped by `key`; an invalid item is reported `Invalid`, every item of
 * a key claimed more than once is reported by `duplicate` and dropped.
 */
function uniqueValid<T extends { metadata: Meta }>(
  items: readonly T[],
  kind: OwnKind,
  problemOf: (item: T) => string | undefined,
  keyOf: (item: T) => string,
  duplicate: (list: readonly T[], key: string) => { reason: string; message: string },
  report: Report,
): T[] {
  const byKey = new Map<string, T[]>();
  for (const item of items) {
    const problem = problemOf(item);
    if (problem) report(kind, item.metadata, 'Invalid', problem);
    else byKey.set(keyOf(item), [...(byKey.get(keyOf(item)) ?? []), item]);
  }
  const out: T[] = [];
  for (const [key, list] of byKey) {
    if (list.length === 1) out.push(list[0] as T);
    else {
      const d = duplicate(list, key);
      for (const item of list) report(kind, item.metadata, d.reason, d.message);
    }
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
  const problem = platformProblem(s);
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
      const svc = serviceFromUrl(s.jwt.jwksUri);
      if (svc) platform.jwks = svc;
      else
        report(
          'RetrievalPlatform',
          p.metadata,
          'JwksUnresolved',
          'jwt.jwksUri must name an in-cluster Service URL',
        );
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

/** Valid RetrievalAgents, one per kagent Agent (namespace/name), sorted. */
function resolveAgents(items: readonly RetrievalAgent[], report: Report): Agent[] {
  const agents = uniqueValid(
    items,
    'RetrievalAgent',
    agentProblem,
    (a) => `${a.metadata.namespace}/${a.metadata.name}`,
    (list, k) => ({
      reason: 'DuplicateAgent',
      message: `${list.length} RetrievalAgents claim kagent Agent ${k}`,
    }),
    report,
  ).map((a): Agent => {
    const ns = a.metadata.namespace as string;
    const name = a.metadata.name;
    return {
      namespace: ns,
      name,
      ...(a.metadata.uid ? { uid: a.metadata.uid } : {}),
      res: a,
      rpm: a.spec.rateLimit?.requestsPerMinute ?? 60,
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
    roomProblem,
    (r) => r.spec.roomId,
    (list, id) => duplicateRoom(list.length, id),
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
    const invalid = partnerProblem(p);
    if (invalid) report('PartnerClient', p.metadata, 'Invalid', invalid);
    const clash = invalid ? undefined : groupCollision(p.spec.groups, localGroups);
    if (clash) report('PartnerClient', p.metadata, 'GroupCollision', `group ${clash} is also a local group`);
    return !invalid && !clash;
  });
  return uniqueValid(
    valid,
    'PartnerClient',
    () => undefined,
    partnerKey,
    (list) => ({
      reason: 'DuplicateClient',
      message: `${list.length} PartnerClients share issuer/audience/azp (${list
        .map((x) => x.metadata.name)
        .sort()
        .join(', ')})`,
    }),
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
function bindPartners(
  partners: readonly Partner[],
  platform: Platform,
  agentIndex: ReadonlyMap<string, Agent>,
) {
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
