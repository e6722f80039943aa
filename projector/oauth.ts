/**
 * Public (OAuth partner) route decision, ADR 0017 decisions 6, 8 and 12 (docs/decisions.md#adr-6). Pure: identity comes only
 * from the gateway-validated JWT metadata headers and one unique registry entry; randomness for
 * `delegation_id` is injected.
 */
import { encodeProjection, type OAuthProjection, oauthUserId, utf8Length } from '../contract/index.ts';
import { IDENTITY_HEADER } from '../rules/index.ts';
import { type AgentRoute, isValidTimeoutSetting, type ProjectorConfig, partnerKey } from './config.ts';
import type { DenyReason } from './reasons.ts';
import { CHECK, type CheckRequest, type IdentityHeaders, openCheck, single } from './request.ts';

export const OAUTH_MAX_LIFETIME_SECONDS = 600;
export const CLOCK_SKEW_SECONDS = 30;

export type OAuthDecision =
  | { readonly allow: true; readonly headers: IdentityHeaders; readonly agent: AgentRoute }
  | { readonly allow: false; readonly reason: DenyReason; readonly agent?: AgentRoute };

export interface OAuthOptions {
  /** Current Unix time, seconds. */
  readonly now: number;
  /** Source of `n` cryptographically random bytes (node:crypto randomBytes in production). */
  readonly randomBytes: (n: number) => Uint8Array;
}

function no(reason: DenyReason, agent?: AgentRoute): OAuthDecision {
  return agent === undefined ? { allow: false, reason } : { allow: false, reason, agent };
}

function jwtField(req: CheckRequest, name: string, maxBytes: number): string | undefined {
  const v = single(req, name, 'jwt', 'jwt');
  if (!v.ok || utf8Length(v.value) > maxBytes || /[\x00-\x1f\x7f]/.test(v.value)) return undefined;
  return v.value;
}

export function decideOAuth(req: CheckRequest, config: ProjectorConfig, options: OAuthOptions): OAuthDecision {
  const timeout = config.publicRetrievalTimeoutSeconds;
  if (!isValidTimeoutSetting(timeout)) return no('timeout_setting');
  const agentGot = openCheck(req, config, 'public');
  if (!agentGot.ok) return no(agentGot.reason);
  const agent = agentGot.value;

  const issuer = jwtField(req, CHECK.jwtIssuer, 512);
  const audience = jwtField(req, CHECK.jwtAudience, 255);
  const azp = jwtField(req, CHECK.jwtAzp, 255);
  const expText = jwtField(req, CHECK.jwtExp, 16);
  if (issuer === undefined || audience === undefined || azp === undefined || expText === undefined)
    return no('jwt', agent);
  // CEL `string(jwt.exp)` of an integer claim: plain decimal digits, no sign, no leading zero.
  if (!/^(0|[1-9][0-9]{0,14})$/.test(expText)) return no('jwt', agent);
  const tokenExp = Number(expText);

  const entries = config.partnerIndex.get(partnerKey(issuer, audience, azp)) ?? [];
  if (entries.length === 0) return no('partner_unknown', agent);
  if (entries.length > 1) return no('partner_ambiguous', agent);
  const entry = entries[0]!;
  if (!entry.agents.some((a) => a.namespace === agent.namespace && a.name === agent.name))
    return no('partner_agent', agent);

  const now = options.now;
  if (!Number.isSafeInteger(now) || now < 0) return no('internal', agent);
  // Remaining lifetime must be strictly greater than the public timeout plus the 30 s skew allowance.
  if (!(tokenExp - now > timeout + CLOCK_SKEW_SECONDS)) return no('token_near_expiry', agent);

  const random = options.randomBytes(32);
  if (!(random instanceof Uint8Array) || random.length !== 32) return no('internal', agent);
  const projection: OAuthProjection = {
    agent: { name: agent.name, namespace: agent.namespace },
    allowed_classifications: entry.allowedClassifications,
    client: { audience, azp, issuer, policy_id: entry.policyId },
    delegation_id: Buffer.from(random.buffer, random.byteOffset, random.byteLength).toString('hex'),
    exp: Math.min(now + OAUTH_MAX_LIFETIME_SECONDS, tokenExp),
    groups: entry.groups,
    iat: now,
    kind: 'oidc_client',
    v: 1,
  };
  const encoded = encodeProjection(projection);
  if (!encoded.ok) return no(encoded.reason, agent);
  return {
    allow: true,
    headers: {
      [IDENTITY_HEADER]: encoded.value,
      'x-user-id': oauthUserId(entry.policyId, { issuer, audience, azp }),
    },
    agent,
  };
}
