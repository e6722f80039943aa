/**
 * Every reason code a rule of rules/ reports, in one place. A code names the rule that refused a
 * value, never the value: it is stable, content-free and safe as a metric label. The admission
 * webhook ends each denial with `[code]`, the servers' configuration loaders report it with the
 * field path, and the reconciler's conditions carry the first problem's `path: message [code]`.
 *
 * The cross-object rules (which look at more than one resource) also have the CamelCase reason the
 * reconciler writes on the `Conflict` condition of each resource involved.
 */

/** Rules on one field or one resource. */
export const FIELD_REASONS = [
  // Kubernetes names and references
  'dns-label',
  'dns-subdomain',
  'secret-ref',
  'port',
  'labels',
  // URLs
  'http-url',
  'service-url',
  // Matrix names
  'room-id',
  'server-name',
  // Classification ceilings
  'classifications',
  'agreement-required',
  'agreement-unexpected',
  'agreement-ref',
  // Partners and groups
  'issuer',
  'client-id',
  'policy-id',
  'partner-groups',
  'partner-agents',
  'local-groups',
  // The bridge
  'bridge-regex',
  'bridged-origins',
  // Platform settings
  'platform-name',
  'timeout',
  'capability',
  'ledger-timing',
  'a2a-backend',
  'jwt',
  'live-room-check',
  'embeddings-profile',
  'embeddings-model',
  'database-url',
  'replica-urls',
  'replica-lag',
  'pooler',
  // RetrievalAgent settings
  'agent-name',
  'agent-text',
  'rate-limit',
  'skills',
  // Shape: a required field missing, a wrong type, an unknown field (loaders and the webhook)
  'required',
  'schema',
  // The servers' files only
  'config-version',
  'route-path',
] as const;

/** Rules across resources, and the `Conflict` condition reason the reconciler writes for each. */
export const CROSS_OBJECT_REASONS = {
  /** One Matrix room ID declared by more than one RetrievalRoom. */
  'room-duplicate': 'DuplicateRoom',
  /** One (issuer, audience, azp) mapped by more than one PartnerClient. */
  'partner-duplicate': 'DuplicateClient',
  /** A partner group that is also a local group of the platform. */
  'group-collision': 'GroupCollision',
  /** More RetrievalAgents than both servers' configuration files hold (rules/agent-bound.ts). */
  'agent-limit': 'TooManyAgents',
  /** One kagent Agent (namespace/name) claimed twice (only in offline file sets and loaders). */
  'agent-duplicate': 'DuplicateAgent',
} as const;

export type FieldReason = (typeof FIELD_REASONS)[number];
export type CrossObjectReason = keyof typeof CROSS_OBJECT_REASONS;
export type RuleReason = FieldReason | CrossObjectReason;

export const RULE_REASONS: readonly RuleReason[] = [
  ...FIELD_REASONS,
  ...(Object.keys(CROSS_OBJECT_REASONS) as CrossObjectReason[]),
];

export function isCrossObjectReason(r: string): r is CrossObjectReason {
  return Object.hasOwn(CROSS_OBJECT_REASONS, r);
}
