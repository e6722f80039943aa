/**
 * The ACL prefilter (ADR 0017 decision 2): a validated projection → one parameterized SQL boolean
 * expression over `knowledge.chunks`. Pure: no I/O. The only module that turns identity into SQL.
 *
 * Matrix: classification ∈ projection ceiling AND allowed_principals ⊇ audience (typed objects, so
 *   kind and network take part in the comparison; jsonb `@>` on arrays of exact-shape objects).
 * OAuth:  classification ∈ projection ceiling AND allowed_groups ∩ groups ≠ ∅ (`?|` is exact string
 *   equality on array elements; no prefix match, principals never count).
 * The expressions match the origin's search functions (research/origin-contract.md §1.4) and the
 * expression indexes of migration 0001, so the GIN indexes apply.
 */
import {
  isAllowedClassifications,
  isFullMxid,
  isMatrixProjection,
  isPartnerGroup,
  type MatrixPrincipal,
  type Projection,
  partnerGroupPolicy,
} from '../contract/index.ts';

export interface Predicate {
  /** Boolean SQL over the row alias, with placeholders $first.. */
  readonly sql: string;
  readonly params: readonly unknown[];
}

/** Thrown when a projection that should have been validated is not; callers fail closed. */
export class PredicateError extends Error {
  constructor() {
    super('projection rejected by predicate builder');
    this.name = 'PredicateError';
  }
}

const ALIAS = /^[a-z]$/;

function audienceJson(audience: readonly MatrixPrincipal[]): string {
  // Rebuild each entry so only kind/network/principal can reach the database, whatever the input.
  return JSON.stringify(
    audience.map((a) =>
      a.kind === 'bridged_matrix'
        ? { kind: 'bridged_matrix', network: a.network, principal: a.principal }
        : { kind: 'matrix', principal: a.principal },
    ),
  );
}

/**
 * Build the predicate for an already validated projection. Re-checks the invariants the predicate
 * relies on (non-empty audience/groups, classification ceiling) so an unvalidated value cannot widen it.
 */
export function buildPredicate(p: Projection, firstParam = 1, alias = 'c'): Predicate {
  if (!ALIAS.test(alias) || !Number.isSafeInteger(firstParam) || firstParam < 1) throw new PredicateError();
  if (!isAllowedClassifications(p.allowed_classifications)) throw new PredicateError();
  const classifications = [...p.allowed_classifications];
  const a = `$${firstParam}`;
  const b = `$${firstParam + 1}`;
  const classSql = `(${alias}.metadata->>'classification') = ANY(${a}::text[])`;
  if (isMatrixProjection(p)) {
    const audience = p.audience;
    if (!Array.isArray(audience) || audience.length < 1 || audience.length > 16) throw new PredicateError();
    for (const e of audience) {
      if (!isFullMxid(e.principal)) throw new PredicateError();
      if (e.kind !== 'matrix' && e.kind !== 'bridged_matrix') throw new PredicateError();
    }
    // The ?& clause is implied by @> (same principal strings); it only lets the planner use the
    // selective strings index (migration 0103). The typed @> remains the authorization test.
    const c = `$${firstParam + 2}`;
    return {
      sql:
        `${classSql} AND (${alias}.metadata->'allowed_principals') @> ${b}::jsonb` +
        ` AND jsonb_path_query_array(${alias}.metadata->'allowed_principals', '$[*].principal') ?& ${c}::text[]`,
      params: [classifications, audienceJson(audience), [...new Set(audience.map((e) => e.principal))]],
    };
  }
  if (p.kind !== 'oidc_client') throw new PredicateError();
  const groups = p.groups;
  if (!Array.isArray(groups) || groups.length < 1 || groups.length > 16) throw new PredicateError();
  for (const g of groups) {
    if (!isPartnerGroup(g) || partnerGroupPolicy(g) !== p.client.policy_id) throw new PredicateError();
  }
  return {
    sql: `${classSql} AND (${alias}.metadata->'allowed_groups') ?| ${b}::text[]`,
    params: [classifications, [...groups]],
  };
}
