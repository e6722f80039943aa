/**
 * `RetrievalPlatform.spec.ledger` (rules/ledger.ts): the CRD schema (bounds, defaults and its CEL,
 * run as the apiserver would by crds/validate.ts), the reconciler's conflict analysis, the admission
 * webhook, and both servers' loaders decide alike on the same generated values, and a valid timing
 * renders into both servers' configuration with its defaults filled in. Each property fails when one
 * side alone is changed (a bound, the CEL rule, a loader or the rule).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { render } from '../controller/render/index.ts';
import type { K8sObject, Resources } from '../controller/types.ts';
import { allCrds } from '../crds/schema.ts';
import { crValidator } from '../crds/validate.ts';
import { validateConfig } from '../projector/config.ts';
import { readConfig } from '../retrieval/config.ts';
import { LOCAL_PROFILE } from '../retrieval/embeddings/local.ts';
import { examples } from '../testkit/controller/fixtures.ts';
import { configJson } from '../testkit/projector/fixtures.ts';
import { admissionReview, platform as webhookPlatform } from '../testkit/webhook.ts';
import { review } from '../webhook/review.ts';
import { StaticClusterView } from '../webhook/view.ts';
import {
  checkLedgerTiming,
  DEFAULT_LEDGER_TIMING,
  LEDGER_MINT_WINDOW,
  LEDGER_RECORD_DEADLINE,
  ledgerTiming,
} from './ledger.ts';

const crds = crValidator(allCrds());
const RUNS = 200;

function withLedger(ledger: unknown, capability = 'ledger'): Resources {
  const r = examples();
  const spec = r.platforms[0]!.spec as unknown as Record<string, unknown>;
  spec['capability'] = capability;
  if (ledger !== undefined) spec['ledger'] = ledger;
  return r;
}

const configOf = (objects: K8sObject[], name: string, key: string) =>
  JSON.parse(
    (
      objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === name) as K8sObject & {
        data: Record<string, string>;
      }
    ).data[key]!,
  );

const retrievalJson = (ledger: unknown) => ({
  version: 1,
  agents: [{ namespace: 'kagent', name: 'knowledge-agent' }],
  embeddings: { profile: LOCAL_PROFILE },
  capability: 'ledger',
  ...(ledger !== undefined ? { ledger } : {}),
});

/** Values near every bound, both orderings, absent fields, and a few of the wrong type. */
const field = (b: { readonly min: number; readonly max: number; readonly default: number }) =>
  fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: b.min - 60, max: b.min + 400 }) },
    { weight: 3, arbitrary: fc.integer({ min: b.max - 50, max: b.max + 50 }) },
    { weight: 3, arbitrary: fc.constantFrom(b.min - 1, b.min, b.max, b.max + 1) },
    { weight: 3, arbitrary: fc.constantFrom(b.default - 1, b.default, b.default + 1, 1_999, 2_000, 2_001) },
    { weight: 1, arbitrary: fc.constantFrom(1.5, -1, 0, '1000', null) },
  );
const timing = fc.record(
  {
    recordDeadlineMilliseconds: field(LEDGER_RECORD_DEADLINE),
    mintWindowMilliseconds: field(LEDGER_MINT_WINDOW),
  },
  { requiredKeys: [] },
);

describe('spec.ledger: CRD = conflicts = webhook = both loaders = the rule', () => {
  it('every consumer accepts exactly what checkLedgerTiming accepts (property)', () => {
    const seen = { valid: 0, invalid: 0 };
    fc.assert(
      fc.property(timing, (t) => {
        const rule = checkLedgerTiming(t, 'spec.ledger').length === 0;
        seen[rule ? 'valid' : 'invalid']++;
        const label = JSON.stringify(t);
        const r = withLedger(t);
        const cr = {
          apiVersion: 'retrieval.fgentic.dev/v1alpha1',
          kind: 'RetrievalPlatform',
          metadata: { name: 'default' },
          spec: r.platforms[0]!.spec,
        };
        assert.equal(crds.validate(cr as unknown as Record<string, unknown>).length === 0, rule, `CRD ${label}`);
        const rendered = render(r);
        assert.equal(
          !rendered.conflicts.some((c) => c.kind === 'RetrievalPlatform' && /ledger/.test(c.message)),
          rule,
          `conflicts ${label}`,
        );
        const wp = webhookPlatform();
        (wp['spec'] as Record<string, unknown>)['ledger'] = t;
        assert.equal(
          review(admissionReview(wp), new StaticClusterView([])).review.response.allowed,
          rule,
          `webhook ${label}`,
        );
        assert.equal(
          validateConfig({ ...configJson(), capability: 'ledger', ledger: t }).ok,
          rule,
          `projector ${label}`,
        );
        assert.equal(readConfig(retrievalJson(t)).ok, rule, `retrieval ${label}`);
        if (rule) {
          // What renders is the rule's own reading, defaults filled in, in both servers' configuration.
          const expected = ledgerTiming(t);
          assert.deepEqual(configOf(rendered.objects, 'fgentic-projector-config', 'projector.json').ledger, expected);
          assert.deepEqual(configOf(rendered.objects, 'fgentic-retrieval-config', 'retrieval.json').ledger, expected);
        }
      }),
      { numRuns: RUNS },
    );
    const least = Math.floor(RUNS / 20);
    assert.ok(seen.valid >= least && seen.invalid >= least, `one-sided input: ${JSON.stringify(seen)}`);
  });

  it('the record deadline must lie inside the mint window, defaults included', () => {
    assert.deepEqual(checkLedgerTiming(undefined, 'spec.ledger'), []);
    assert.deepEqual(ledgerTiming(undefined), DEFAULT_LEDGER_TIMING);
    assert.deepEqual(checkLedgerTiming({ recordDeadlineMilliseconds: 1_999 }, 'spec.ledger'), []);
    assert.equal(checkLedgerTiming({ recordDeadlineMilliseconds: 2_000 }, 'spec.ledger')[0]?.reason, 'ledger-timing');
    assert.equal(checkLedgerTiming({ mintWindowMilliseconds: 1_000 }, 'spec.ledger').length, 1);
    assert.deepEqual(checkLedgerTiming({ mintWindowMilliseconds: 1_001 }, 'spec.ledger'), []);
    assert.equal(checkLedgerTiming({ other: 1 }, 'spec.ledger')[0]?.path, 'spec.ledger.other');
  });

  it('plain mode renders no ledger timing; ledger mode renders the defaults when spec.ledger is absent', () => {
    const plain = render(withLedger({ mintWindowMilliseconds: 5_000 }, 'plain')).objects;
    assert.equal(configOf(plain, 'fgentic-projector-config', 'projector.json').ledger, undefined);
    assert.equal(configOf(plain, 'fgentic-retrieval-config', 'retrieval.json').ledger, undefined);
    const ledger = render(withLedger(undefined)).objects;
    assert.deepEqual(configOf(ledger, 'fgentic-projector-config', 'projector.json').ledger, DEFAULT_LEDGER_TIMING);
    assert.deepEqual(configOf(ledger, 'fgentic-retrieval-config', 'retrieval.json').ledger, DEFAULT_LEDGER_TIMING);
    const parsed = validateConfig(configOf(ledger, 'fgentic-projector-config', 'projector.json'));
    assert.ok(parsed.ok);
    assert.equal(parsed.config.ledger.recordDeadlineMilliseconds, LEDGER_RECORD_DEADLINE.default);
  });
});
