/**
 * The classification ceiling of a RetrievalRoom or PartnerClient and its agreement reference. The
 * contract allows exactly two ceilings (`contract/identifiers.ts` `isAllowedClassifications`);
 * `approved_non_public` needs a reference to the agreement that approves it, and a reference without
 * it is refused so a stale one cannot linger after a downgrade (docs/decisions.md#adr-projection).
 */
import { type AllowedClassifications, isAllowedClassifications } from '../contract/index.ts';
import { charLength } from './kube.ts';
import { at, type Problem, problem } from './result.ts';

export const DEFAULT_CEILING: AllowedClassifications = ['public'];
export const WIDE_CEILING: AllowedClassifications = ['approved_non_public', 'public'];
export const AGREEMENT_REF_MAX = 253;

/** The ceiling a resource means: absent is the default `["public"]`. */
export function ceilingOf(v: unknown): unknown {
  return v === undefined ? DEFAULT_CEILING : v;
}

/** The normalised ceiling of a value that has passed `checkCeiling` (a fresh array). */
export function normCeiling(v: readonly string[] | undefined): ['public'] | ['approved_non_public', 'public'] {
  return v && v.length === 2 ? ['approved_non_public', 'public'] : ['public'];
}

/**
 * `allowedClassifications` (absent = `["public"]`) and `agreementRef` of one spec. A present
 * `agreementRef` is any value other than absent/null; it must be a non-empty string of at most 253
 * characters.
 */
export function checkCeiling(allowed: unknown, agreementRef: unknown, path = 'spec'): Problem[] {
  const ceiling = ceilingOf(allowed);
  if (!isAllowedClassifications(ceiling))
    return [
      problem(
        'classifications',
        at(path, 'allowedClassifications'),
        'must be exactly ["public"] or ["approved_non_public","public"]',
      ),
    ];
  const hasRef = agreementRef !== undefined && agreementRef !== null;
  const refPath = at(path, 'agreementRef');
  if (ceiling.length === 2 && !hasRef)
    return [problem('agreement-required', refPath, 'approved_non_public requires an agreementRef')];
  if (ceiling.length === 1 && hasRef)
    return [problem('agreement-unexpected', refPath, 'agreementRef is only valid with approved_non_public')];
  if (
    hasRef &&
    (typeof agreementRef !== 'string' || agreementRef === '' || charLength(agreementRef) > AGREEMENT_REF_MAX)
  )
    return [problem('agreement-ref', refPath, `must be a string of 1-${AGREEMENT_REF_MAX} characters`)];
  return [];
}

/** The CRD's view of the same rule: the list schema and the CEL rules on the spec object. */
export const CEILING_SCHEMA = {
  items: { type: 'string', enum: [...WIDE_CEILING] },
  default: [...DEFAULT_CEILING],
  minItems: 1,
  maxItems: 2,
} as const;

const celList = (c: readonly string[]) => `[${c.map((x) => `'${x}'`).join(', ')}]`;

export const CEILING_CEL = [
  {
    rule: `self.allowedClassifications == ${celList(DEFAULT_CEILING)} || self.allowedClassifications == ${celList(WIDE_CEILING)}`,
    message: 'allowedClassifications must be exactly ["public"] or ["approved_non_public","public"]',
  },
  {
    rule: "('approved_non_public' in self.allowedClassifications) == has(self.agreementRef)",
    message: 'agreementRef is required with approved_non_public and forbidden otherwise',
  },
] as const;

export const AGREEMENT_REF_SCHEMA = { minLength: 1, maxLength: AGREEMENT_REF_MAX } as const;
