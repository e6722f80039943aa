/**
 * PartnerClient rules: the client identifiers (issuer, audience, azp), the mapping key, the policy ID
 * and the partner groups, and the local groups they must never collide with.
 *
 * `audience` and `azp` are 1-255 printable ASCII characters other than space (docs/decisions.md#d12-client-identifiers):
 * the contract carries them in `client` only in that form (`contract/projection.ts` `isTokenText`),
 * so a wider value would pass apply time and then deny every request of the partner at run time.
 */
import { isDns1123Label, isTokenText, MAX_PARTNER_GROUPS, partnerGroupsFault } from '../contract/index.ts';
import { checkIssuer } from './issuers.ts';
import { MAX_LOCAL_GROUPS, MAX_PARTNER_AGENTS } from './limits.ts';
import { at, type Problem, problem } from './result.ts';

export const CLIENT_TEXT_MAX = 255;
/** The CRD pattern of `audience` and `azp` (with minLength 1, maxLength 255). */
export const CLIENT_TEXT_PATTERN = '^[\\x21-\\x7e]+$';
export const CLIENT_TEXT_SCHEMA = {
  minLength: 1,
  maxLength: CLIENT_TEXT_MAX,
  pattern: CLIENT_TEXT_PATTERN,
} as const;

export function isClientText(v: unknown): v is string {
  return isTokenText(v, CLIENT_TEXT_MAX);
}

export const PARTNER_PREFIX = 'partner/';
export { MAX_PARTNER_GROUPS };

/** The registry key of a PartnerClient: its (issuer, audience, azp), unique across the cluster. */
export function partnerKey(issuer: string, audience: string, azp: string): string {
  return JSON.stringify([issuer, audience, azp]);
}

/** issuer, audience, azp and policyId of a PartnerClient spec. */
export function checkClient(client: object, path = 'spec'): Problem[] {
  const spec = client as { readonly [k: string]: unknown };
  const out = checkIssuer(spec['issuer'], at(path, 'issuer'));
  for (const f of ['audience', 'azp'])
    if (!isClientText(spec[f]))
      out.push(
        problem('client-id', at(path, f), `must be 1-${CLIENT_TEXT_MAX} printable ASCII characters without spaces`),
      );
  if (!isDns1123Label(spec['policyId']))
    out.push(problem('policy-id', at(path, 'policyId'), 'must be a DNS-1123 label'));
  return out;
}

/** At most MAX_PARTNER_AGENTS unique RetrievalAgent references (namespace and name labels). */
export function checkPartnerAgents(agents: unknown, path: string): Problem[] {
  if (agents === undefined) return [];
  if (!Array.isArray(agents) || agents.length > MAX_PARTNER_AGENTS)
    return [problem('partner-agents', path, `must list at most ${MAX_PARTNER_AGENTS} agents`)];
  const out: Problem[] = [];
  const seen = new Set<string>();
  agents.forEach((a: { namespace?: unknown; name?: unknown } | null, i) => {
    const p = `${path}[${i}]`;
    if (!isDns1123Label(a?.namespace) || !isDns1123Label(a?.name))
      out.push(problem('partner-agents', p, 'namespace and name must be DNS-1123 labels'));
    else if (seen.has(`${a.namespace}/${a.name}`)) out.push(problem('partner-agents', p, 'duplicate agent'));
    else seen.add(`${a.namespace}/${a.name}`);
  });
  return out;
}

const GROUP_FAULTS = {
  count: `must list 1 to ${MAX_PARTNER_GROUPS} groups`,
  pattern: 'must be partner/<policyId>/<group>',
  policy: `must start with ${PARTNER_PREFIX}<policyId>/`,
  duplicate: 'duplicate group',
  order: 'must be in ascending order',
} as const;

/**
 * 1-16 unique groups, each `partner/<policyId>/<group>` (the contract's rule, `partnerGroupsFault`);
 * order does not matter in a resource or in the projector's file (the projector sorts them).
 */
export function checkPartnerGroups(groups: unknown, policyId: unknown, path: string): Problem[] {
  const f = partnerGroupsFault(groups, policyId, false);
  if (!f) return [];
  return [problem('partner-groups', f.index === undefined ? path : `${path}[${f.index}]`, GROUP_FAULTS[f.fault])];
}

/** Local group names of the RetrievalPlatform: lowercase, at most 128, never in the partner namespace. */
export const LOCAL_GROUP_MAX = 128;
export const LOCAL_GROUP_PATTERN = '^[a-z0-9]([-a-z0-9._/]{0,126}[a-z0-9])?$';
const LOCAL_GROUP = new RegExp(LOCAL_GROUP_PATTERN);

export function isLocalGroup(v: unknown): v is string {
  return typeof v === 'string' && LOCAL_GROUP.test(v) && !v.startsWith(PARTNER_PREFIX);
}

export function checkLocalGroups(groups: unknown, path: string, max = MAX_LOCAL_GROUPS): Problem[] {
  if (groups === undefined) return [];
  if (!Array.isArray(groups) || groups.length > max)
    return [problem('local-groups', path, `must be an array of at most ${max} groups`)];
  const out: Problem[] = [];
  const seen = new Set<unknown>();
  groups.forEach((g, i) => {
    const p = `${path}[${i}]`;
    if (typeof g === 'string' && g.startsWith(PARTNER_PREFIX))
      out.push(problem('group-collision', p, `local groups must not start with ${PARTNER_PREFIX}`));
    else if (!isLocalGroup(g)) out.push(problem('local-groups', p, `must match ${LOCAL_GROUP_PATTERN}`));
    else if (seen.has(g)) out.push(problem('local-groups', p, 'duplicate local group'));
    seen.add(g);
  });
  return out;
}

/** The first partner group that is also a local group. */
export function groupCollision(partnerGroups: Iterable<unknown>, localGroups: ReadonlySet<string>): string | undefined {
  for (const g of partnerGroups) if (typeof g === 'string' && localGroups.has(g)) return g;
  return undefined;
}

export const PARTNER_GROUPS_CEL = {
  rule: `self.groups.all(g, g.startsWith('${PARTNER_PREFIX}' + self.policyId + '/'))`,
  message: 'every group must be partner/<policyId>/<group>',
} as const;

export const LOCAL_GROUPS_CEL = {
  rule: `!has(self.localGroups) || self.localGroups.all(g, !g.startsWith('${PARTNER_PREFIX}'))`,
  message: 'local groups may not use the partner/ namespace',
} as const;
