/**
 * Validation and conflict detection. A conflicting or invalid resource renders nothing and is reported
 * (it becomes a `Conflict=True` condition); the rest renders normally. Never a partial, permissive config:
 * everything here only removes entries from the registries and routes.
 */
import { isDns1123Label, isPartnerGroup, isRoomId } from '../../contract/index.ts';
import type { Conflict, OwnKind, PartnerClient, Resources, RetrievalAgent, RetrievalRoom } from '../types.ts';
import {
  type Agent,
  cmpStr,
  type Model,
  normClassifications,
  type Partner,
  type Platform,
  partnerKey,
  type Room,
  serviceFromUrl,
} from './model.ts';

const HTTPS_ISSUER = /^https:\/\/[^\s/?#@]+(\/[^\s?#]*)?$/;

function classificationsValid(v: string[] | undefined, agreementRef: string | undefined): string | undefined {
  const c = v ?? ['public'];
  const ok =
    (c.length === 1 && c[0] === 'public') ||
    (c.length === 2 && c[0] === 'approved_non_public' && c[1] === 'public');
  if (!ok) return 'allowedClassifications must be exactly ["public"] or ["approved_non_public","public"]';
  if ((c.length === 2) !== (agreementRef !== undefined && agreementRef !== ''))
    return 'agreementRef is required with approved_non_public and forbidden otherwise';
  return undefined;
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

function roomProblem(r: RetrievalRoom): string | undefined {
  if (!isRoomId(r.spec?.roomId)) return 'spec.roomId is not a Matrix room ID';
  return classificationsValid(r.spec.allowedClassifications, r.spec.agreementRef);
}

function partnerProblem(p: PartnerClient): string | undefined {
  const s = p.spec;
  if (!s || typeof s.issuer !== 'string' || s.issuer.length > 512 || !HTTPS_ISSUER.test(s.issuer))
    return 'spec.issuer must be an https URL of at most 512 characters';
  if (!s.audience || s.audience.length > 255 || !s.azp || s.azp.length > 255)
    return 'audience/azp must be 1-255 chars';
  if (!isDns1123Label(s.policyId)) return 'spec.policyId must be a DNS-1123 label';
  if (!Array.isArray(s.groups) || s.groups.length < 1 || s.groups.length > 16)
    return 'spec.groups must hold 1-16 groups';
  if (new Set(s.groups).size !== s.groups.length) return 'spec.groups has duplicates';
  for (const g of s.groups)
    if (!isPartnerGroup(g) || !g.startsWith(`partner/${s.policyId}/`))
      return `group ${JSON.stringify(g)} is not partner/${s.policyId}/<group>`;
  return classificationsValid(s.allowedClassifications, s.agreementRef);
}

export interface Analysis {
  model?: Model;
  conflicts: Conflict[];
}

export function analyse(input: Resources): Analysis {
  const conflicts: Conflict[] = [];
  const report = (kind: OwnKind, m: { namespace?: string; name: string }, reason: string, message: string) =>
    conflicts.push({
      kind,
      ...(m.namespace !== undefined ? { namespace: m.namespace } : {}),
      name: m.name,
      reason,
      message,
    });

  // Platform: exactly one, named default.
  let platform: Platform | undefined;
  const platforms = input.platforms.filter((p) => {
    if (p.metadata.name !== 'default') {
      report('RetrievalPlatform', p.metadata, 'InvalidName', 'the RetrievalPlatform must be named default');
      return false;
    }
    return true;
  });
  if (platforms.length > 1) {
    for (const p of platforms)
      report('RetrievalPlatform', p.metadata, 'Duplicate', 'more than one RetrievalPlatform named default');
  } else if (platforms.length === 1) {
    const p = platforms[0] as (typeof platforms)[number];
    const s = p.spec;
    const t = s.publicRetrievalTimeoutSeconds ?? 30;
    const gw = s.gateway;
    let problem: string | undefined;
    if (!Number.isInteger(t) || t < 1 || t > 60)
      problem = 'publicRetrievalTimeoutSeconds must be within 1-60';
    else if (!gw?.localListener) problem = 'gateway.localListener is required';
    else if ((s.localGroups ?? []).some((g) => g.startsWith('partner/')))
      problem = 'localGroups may not use the partner/ namespace';
    else if (s.capability !== undefined && s.capability !== 'plain' && s.capability !== 'ledger')
      problem = 'capability must be plain or ledger';
    if (problem) report('RetrievalPlatform', p.metadata, 'Invalid', problem);
    else {
      platform = {
        name: p.metadata.name,
        ...(p.metadata.uid ? { uid: p.metadata.uid } : {}),
        spec: s,
        timeout: t,
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
        else report('RetrievalPlatform', p.metadata, 'JwksUnresolved', 'the JWKS Secret could not be read');
      }
    }
  }
  const all = (kind: OwnKind, items: { metadata: { namespace?: string; name: string } }[], msg: string) => {
    for (const i of items) report(kind, i.metadata, 'NoPlatform', msg);
  };
  if (!platform) {
    const msg = 'no valid RetrievalPlatform "default": nothing is rendered';
    all('RetrievalAgent', input.agents, msg);
    all('RetrievalRoom', input.rooms, msg);
    all('PartnerClient', input.partners, msg);
    return { conflicts: sortConflicts(conflicts) };
  }

  // Agents: valid, unique per kagent Agent (namespace/name).
  const byAgent = new Map<string, RetrievalAgent[]>();
  for (const a of input.agents) {
    const problem = agentProblem(a);
    if (problem) {
      report('RetrievalAgent', a.metadata, 'Invalid', problem);
      continue;
    }
    const k = `${a.metadata.namespace}/${a.metadata.name}`;
    byAgent.set(k, [...(byAgent.get(k) ?? []), a]);
  }
  const agents: Agent[] = [];
  for (const [k, list] of byAgent) {
    if (list.length > 1) {
      for (const a of list)
        report(
          'RetrievalAgent',
          a.metadata,
          'DuplicateAgent',
          `${list.length} RetrievalAgents claim kagent Agent ${k}`,
        );
      continue;
    }
    const a = list[0] as RetrievalAgent;
    const ns = a.metadata.namespace as string;
    const name = a.metadata.name;
    const localPath = `/api/a2a/${ns}/${name}`;
    agents.push({
      namespace: ns,
      name,
      ...(a.metadata.uid ? { uid: a.metadata.uid } : {}),
      res: a,
      rpm: a.spec.rateLimit?.requestsPerMinute ?? 60,
      public: a.spec.public === true,
      localPath,
      publicPath: `/a2a/${ns}/${name}`,
      partners: [],
    });
  }
  agents.sort((x, y) => cmpStr(x.namespace, y.namespace) || cmpStr(x.name, y.name));
  const agentIndex = new Map(agents.map((a) => [`${a.namespace}/${a.name}`, a]));

  // Rooms: valid, one record per exact room ID.
  const byRoom = new Map<string, RetrievalRoom[]>();
  for (const r of input.rooms) {
    const problem = roomProblem(r);
    if (problem) {
      report('RetrievalRoom', r.metadata, 'Invalid', problem);
      continue;
    }
    byRoom.set(r.spec.roomId, [...(byRoom.get(r.spec.roomId) ?? []), r]);
  }
  const rooms: Room[] = [];
  for (const [id, list] of byRoom) {
    if (list.length > 1) {
      for (const r of list)
        report(
          'RetrievalRoom',
          r.metadata,
          'DuplicateRoom',
          `${list.length} RetrievalRooms claim room ${id}`,
        );
      continue;
    }
    const r = list[0] as RetrievalRoom;
    rooms.push({
      name: r.metadata.name,
      res: r,
      roomId: id,
      classifications: normClassifications(r.spec.allowedClassifications),
    });
  }
  rooms.sort((x, y) => cmpStr(x.roomId, y.roomId));

  // Partners: valid, unique (issuer, audience, azp), groups disjoint from local groups, verifiable issuer.
  const localGroups = new Set(platform.spec.localGroups ?? []);
  const byKey = new Map<string, PartnerClient[]>();
  for (const p of input.partners) {
    const problem = partnerProblem(p);
    if (problem) {
      report('PartnerClient', p.metadata, 'Invalid', problem);
      continue;
    }
    const clash = p.spec.groups.find((g) => localGroups.has(g));
    if (clash) {
      report('PartnerClient', p.metadata, 'GroupCollision', `group ${clash} is also a local group`);
      continue;
    }
    byKey.set(partnerKey(p), [...(byKey.get(partnerKey(p)) ?? []), p]);
  }
  const partners: Partner[] = [];
  for (const list of byKey.values()) {
    if (list.length > 1) {
      for (const p of list)
        report(
          'PartnerClient',
          p.metadata,
          'DuplicateClient',
          `${list.length} PartnerClients share issuer/audience/azp (${list
            .map((x) => x.metadata.name)
            .sort()
            .join(', ')})`,
        );
      continue;
    }
    const p = list[0] as PartnerClient;
    const refs = (p.spec.agents ?? [])
      .filter((r) => agentIndex.has(`${r.namespace}/${r.name}`))
      .map((r) => ({ namespace: r.namespace, name: r.name }))
      .sort((x, y) => cmpStr(x.namespace, y.namespace) || cmpStr(x.name, y.name));
    partners.push({
      name: p.metadata.name,
      res: p,
      classifications: normClassifications(p.spec.allowedClassifications),
      agents: refs,
    });
  }
  partners.sort(
    (x, y) =>
      cmpStr(x.res.spec.issuer, y.res.spec.issuer) ||
      cmpStr(x.res.spec.audience, y.res.spec.audience) ||
      cmpStr(x.res.spec.azp, y.res.spec.azp),
  );
  const jwtIssuer = platform.spec.jwt?.issuer;
  for (const p of partners) {
    if (p.res.spec.issuer !== jwtIssuer || !platform.jwks || !platform.spec.gateway.publicListener) continue;
    for (const r of p.agents) agentIndex.get(`${r.namespace}/${r.name}`)?.partners.push(p);
  }
  return {
    model: {
      platform,
      platformRes: platforms[0] as NonNullable<(typeof platforms)[0]>,
      agents,
      rooms,
      partners,
    },
    conflicts: sortConflicts(conflicts),
  };
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
