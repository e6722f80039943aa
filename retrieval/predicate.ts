/**
 * The ACL prefilter (ADR 0017 decision 2, docs/decisions.md#adr-2): a validated projection → one parameterized SQL boolean
 * expression over `knowledge.chunks`. Pure: no I/O. The only module that turns identity into SQL.
 *
 * Matrix: classification ∈ projection ceiling AND allowed_principals ⊇ audience (typed objects, so
 *   kind and network take part in the comparison; jsonb `@>` on arrays of exact-shape objects).
 * OAuth:  classification ∈ projection ceiling AND allowed_groups ∩ groups ≠ ∅ (`?|` is exact string
 *   equality on array elements; no prefix match, principals never count).
 * The same expressions are the WHERE of the search functions in migration 0006, which is where the
 * server runs them (the retrieval role can read rows only through those functions); `buildPredicate`
 * states them as SQL over a row alias for tools that explain or inspect the filter as the owner, and
 * `searchArguments` gives the typed arguments the functions take. Both re-check the projection.
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

function checkPlacement(firstParam: number, alias: string): void {
  if (!ALIAS.test(alias) || !Number.isSafeInteger(firstParam) || firstParam < 1) throw new PredicateError();
}

/*
 * The rules one at a time, so that an operator-side explanation (explain/) asks the
 * database the very same questions as the search; buildPredicate is their conjunction.
 */

/** Row classification within the ceiling; one parameter ($firstParam). */
export function classificationRule(ceiling: unknown, firstParam = 1, alias = 'c'): Predicate {
  checkPlacement(firstParam, alias);
  if (!isAllowedClassifications(ceiling)) throw new PredicateError();
  return {
    sql: `(${alias}.metadata->>'classification') = ANY($${firstParam}::text[])`,
    params: [[...ceiling]],
  };
}

/** Every audience entry, as an identical typed object, in allowed_principals; two parameters. */
export function audienceRule(audience: readonly MatrixPrincipal[], firstParam = 1, alias = 'c'): Predicate {
  checkPlacement(firstParam, alias);
  if (!Array.isArray(audience) || audience.length < 1 || audience.length > 16) throw new PredicateError();
  for (const e of audience) {
    if (!isFullMxid(e.principal)) throw new PredicateError();
    if (e.kind !== 'matrix' && e.kind !== 'bridged_matrix') throw new PredicateError();
  }
  // The ?& clause is implied by @> (same principal strings); it only lets the planner use the
  // selective strings index (migration 0103). The typed @> remains the authorization test.
  return {
    sql:
      `(${alias}.metadata->'allowed_principals') @> $${firstParam}::jsonb` +
      ` AND jsonb_path_query_array(${alias}.metadata->'allowed_principals', '$[*].principal') ?& $${firstParam + 1}::text[]`,
    params: [audienceJson(audience), [...new Set(audience.map((e) => e.principal))]],
  };
}

/** At least one of the partner's groups, exactly, in allowed_groups; one parameter. */
export function groupsRule(groups: readonly string[], policyId: string, firstParam = 1, alias = 'c'): Predicate {
  checkPlacement(firstParam, alias);
  if (!Array.isArray(groups) || groups.length < 1 || groups.length > 16) throw new PredicateError();
  for (const g of groups) {
    if (!isPartnerGroup(g) || partnerGroupPolicy(g) !== policyId) throw new PredicateError();
  }
  return {
    sql: `(${alias}.metadata->'allowed_groups') ?| $${firstParam}::text[]`,
    params: [[...groups]],
  };
}

/**
 * Build the predicate for an already validated projection. Re-checks the invariants the predicate
 * relies on (non-empty audience/groups, classification ceiling) so an unvalidated value cannot widen it.
 */
export function buildPredicate(p: Projection, firstParam = 1, alias = 'c'): Predicate {
  const cls = classificationRule(p.allowed_classifications, firstParam, alias);
  const rest = isMatrixProjection(p)
    ? audienceRule(p.audience, firstParam + 1, alias)
    : p.kind === 'oidc_client'
      ? groupsRule(p.groups, p.client.policy_id, firstParam + 1, alias)
      : undefined;
  if (rest === undefined) throw new PredicateError();
  return { sql: `${cls.sql} AND ${rest.sql}`, params: [...cls.params, ...rest.params] };
}

/** Typed arguments of fgentic.search_matrix_v1 / fgentic.search_groups_v1. */
export type SearchArguments =
  | {
      readonly kind: 'matrix';
      readonly classifications: readonly string[];
      /** JSON array of typed principals, rebuilt field by field. */
      readonly audience: string;
    }
  | {
      readonly kind: 'groups';
      readonly classifications: readonly string[];
      readonly policyId: string;
      readonly groups: readonly string[];
    };

/** The search-function arguments for an already validated projection (same checks as buildPredicate). */
export function searchArguments(p: Projection): SearchArguments {
  // buildPredicate performs every check the arguments rely on; its SQL is not used here.
  const pred = buildPredicate(p);
  if (isMatrixProjection(p)) {
    return {
      kind: 'matrix',
      classifications: pred.params[0] as string[],
      audience: pred.params[1] as string,
    };
  }
  if (p.kind !== 'oidc_client') throw new PredicateError();
  return {
    kind: 'groups',
    classifications: pred.params[0] as string[],
    policyId: p.client.policy_id,
    groups: pred.params[1] as string[],
  };
}
