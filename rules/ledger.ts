/**
 * The capability ledger's timing (`RetrievalPlatform.spec.ledger`, docs/ledger.md): how long the
 * projector waits for a record's confirmation before it stops minting (record deadline), and how long
 * the retrieval server re-checks a value the ledger does not have yet before it denies `unminted`
 * (mint window). A value answered and recorded within the deadline must be found within the window,
 * so the deadline lies strictly inside it. Both servers' loaders, the CRD, the reconciler's conflict
 * analysis and the admission webhook all decide with this module.
 */
import { isIntegerIn, oneOf, type Problem, problem } from './result.ts';

/** How the retrieval server trusts a projection; the first is the default (docs/ledger.md). */
export const CAPABILITY_MODES = ['plain', 'ledger'] as const;
export type CapabilityMode = (typeof CAPABILITY_MODES)[number];
export const DEFAULT_CAPABILITY: CapabilityMode = CAPABILITY_MODES[0];

export const isCapabilityMode = oneOf(CAPABILITY_MODES);

export const LEDGER_RECORD_DEADLINE = { min: 100, max: 10_000, default: 1_000 } as const;
export const LEDGER_MINT_WINDOW = { min: 200, max: 30_000, default: 2_000 } as const;

/** The timing with defaults applied (milliseconds). */
export interface LedgerTiming {
  readonly recordDeadlineMilliseconds: number;
  readonly mintWindowMilliseconds: number;
}

export const DEFAULT_LEDGER_TIMING: LedgerTiming = {
  recordDeadlineMilliseconds: LEDGER_RECORD_DEADLINE.default,
  mintWindowMilliseconds: LEDGER_MINT_WINDOW.default,
};

const FIELDS = ['recordDeadlineMilliseconds', 'mintWindowMilliseconds'] as const;

/** Problems of a `ledger` object (absent: the defaults, valid); each field optional. */
export function checkLedgerTiming(v: unknown, path: string): Problem[] {
  if (v === undefined) return [];
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    return [problem('ledger-timing', path, 'must be an object')];
  const o = v as Record<string, unknown>;
  const out: Problem[] = [];
  for (const k of Object.keys(o))
    if (!(FIELDS as readonly string[]).includes(k)) out.push(problem('ledger-timing', `${path}.${k}`, 'unknown field'));
  // Only a missing field takes its default; null is a wrong type like any other.
  const deadline = 'recordDeadlineMilliseconds' in o ? o['recordDeadlineMilliseconds'] : LEDGER_RECORD_DEADLINE.default;
  const window = 'mintWindowMilliseconds' in o ? o['mintWindowMilliseconds'] : LEDGER_MINT_WINDOW.default;
  if (!isIntegerIn(deadline, LEDGER_RECORD_DEADLINE))
    out.push(
      problem(
        'ledger-timing',
        `${path}.recordDeadlineMilliseconds`,
        `must be an integer ${LEDGER_RECORD_DEADLINE.min}-${LEDGER_RECORD_DEADLINE.max}`,
      ),
    );
  if (!isIntegerIn(window, LEDGER_MINT_WINDOW))
    out.push(
      problem(
        'ledger-timing',
        `${path}.mintWindowMilliseconds`,
        `must be an integer ${LEDGER_MINT_WINDOW.min}-${LEDGER_MINT_WINDOW.max}`,
      ),
    );
  if (out.length === 0 && (deadline as number) >= (window as number))
    out.push(problem('ledger-timing', path, 'recordDeadlineMilliseconds must be less than mintWindowMilliseconds'));
  return out;
}

/** The timing with defaults applied, or undefined when `checkLedgerTiming` reports a problem. */
export function ledgerTiming(v: unknown): LedgerTiming | undefined {
  if (checkLedgerTiming(v, 'ledger').length > 0) return undefined;
  const o = (v ?? {}) as Record<string, number | undefined>;
  return {
    recordDeadlineMilliseconds: o['recordDeadlineMilliseconds'] ?? LEDGER_RECORD_DEADLINE.default,
    mintWindowMilliseconds: o['mintWindowMilliseconds'] ?? LEDGER_MINT_WINDOW.default,
  };
}

/** The CRD's ordering rule on `spec.ledger` (absent fields take their defaults, as in the rule above). */
export const LEDGER_TIMING_CEL = {
  rule: `(has(self.recordDeadlineMilliseconds) ? self.recordDeadlineMilliseconds : ${LEDGER_RECORD_DEADLINE.default}) < (has(self.mintWindowMilliseconds) ? self.mintWindowMilliseconds : ${LEDGER_MINT_WINDOW.default})`,
  message: 'recordDeadlineMilliseconds must be less than mintWindowMilliseconds',
} as const;
