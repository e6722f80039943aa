/**
 * The plain-TypeScript model of the ADR 0017 row rules and the generators of the differential ACL
 * tests (retrieval/acl.test.ts; retrieval/replica-bound.test.ts runs the same property through a
 * replica and PgBouncer). Tests only.
 */
import fc from 'fast-check';
import {
  type ChunkMetadata,
  CLASSIFICATIONS,
  isMatrixProjection,
  type MatrixPrincipal,
  type Projection,
} from '../contract/index.ts';
import { decodeFixture, matrixHeader, oauthHeader, P } from './retrieval.ts';

/** The reference model: ADR 0017 Matrix rule 5 and OAuth rule 4 (docs/decisions.md#adr-matrix-rules), written as plainly as possible. */
export function referenceAllows(p: Projection, m: ChunkMetadata): boolean {
  if (!(p.allowed_classifications as readonly string[]).includes(m.classification)) return false;
  if (isMatrixProjection(p)) {
    if (p.audience.length === 0) return false;
    return p.audience.every((a) =>
      m.allowed_principals.some(
        (r) =>
          r.kind === a.kind &&
          r.principal === a.principal &&
          (r.kind === 'bridged_matrix' ? r.network : undefined) ===
            (a.kind === 'bridged_matrix' ? a.network : undefined),
      ),
    );
  }
  return p.groups.some((g) => m.allowed_groups.includes(g));
}

export const PRINCIPALS: MatrixPrincipal[] = Object.values(P);
export const GROUPS = [
  'partner/org-b/docs',
  'partner/org-b/doc',
  'partner/org-b/docs-internal',
  'partner/org-b/eng',
  'partner/org-c/docs',
];

const subset = <T>(xs: readonly T[]) => fc.subarray([...xs]);
export const metadataArb = fc.record({
  classification: fc.constantFrom(...CLASSIFICATIONS),
  principals: subset(PRINCIPALS),
  groups: subset(GROUPS),
});
export const matrixArb = fc.record({
  kind: fc.constant('matrix' as const),
  caller: fc.constantFrom(...PRINCIPALS),
  others: subset(PRINCIPALS),
  wide: fc.boolean(),
});
export const oauthArb = fc.record({
  kind: fc.constant('oauth' as const),
  policy: fc.constantFrom('org-b', 'org-c'),
  pick: fc.array(fc.nat(), { minLength: 1, maxLength: 4 }),
  wide: fc.boolean(),
});

export type GenProjection =
  | { kind: 'matrix'; caller: MatrixPrincipal; others: MatrixPrincipal[]; wide: boolean }
  | { kind: 'oauth'; policy: string; pick: number[]; wide: boolean };

export function projectionFrom(x: GenProjection): Projection {
  const classifications = x.wide ? (['approved_non_public', 'public'] as const) : (['public'] as const);
  if (x.kind === 'matrix') {
    const key = (p: MatrixPrincipal) => JSON.stringify(p);
    const audience = [...new Map([x.caller, ...x.others].map((p) => [key(p), p])).values()];
    return decodeFixture(matrixHeader({ caller: x.caller, audience, classifications }));
  }
  const own = GROUPS.filter((g) => g.startsWith(`partner/${x.policy}/`));
  const groups = [...new Set(x.pick.map((n) => own[n % own.length] as string))];
  return decodeFixture(oauthHeader({ policy: x.policy, groups, classifications }));
}
