/** X-User-Id for OAuth callers: `oidc:<policy_id>:<lowercase SHA-256 of JCS {issuer,audience,azp}>`. */
import { isDns1123Label } from './identifiers.ts';
import { jcsSha256 } from './jcs.ts';

export interface OAuthIdentity {
  readonly issuer: string;
  readonly audience: string;
  readonly azp: string;
}

export function oauthIdentitySha256(identity: OAuthIdentity): string {
  return jcsSha256({ audience: identity.audience, azp: identity.azp, issuer: identity.issuer });
}

export function oauthUserId(policyId: string, identity: OAuthIdentity): string {
  if (!isDns1123Label(policyId)) throw new TypeError('policy_id must be a DNS-1123 label');
  return `oidc:${policyId}:${oauthIdentitySha256(identity)}`;
}
