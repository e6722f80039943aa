/**
 * One bridge-regex rule (rules/bridge.ts) in every layer: the CRD (its pattern and CEL, run by
 * crds/validate.ts as the apiserver would), the webhook's review, the render's conflict analysis and
 * the projector's loader decide alike on the same generated strings. The CRD cannot compile a regex,
 * so it may admit exactly the syntactically valid ones that do not compile, which the webhook and
 * the render then refuse. Each property fails when one layer alone is changed.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { render } from '../controller/render/index.ts';
import { allCrds } from '../crds/schema.ts';
import { crValidator } from '../crds/validate.ts';
import { validateConfig } from '../projector/config.ts';
import { examples } from '../testkit/controller/fixtures.ts';
import { configJson } from '../testkit/projector/fixtures.ts';
import { admissionReview, platform as webhookPlatform } from '../testkit/webhook.ts';
import { review } from '../webhook/review.ts';
import { StaticClusterView } from '../webhook/view.ts';
import { BRIDGE_REGEX_MAX, bridgeRegexFault } from './index.ts';

const crds = crValidator(allCrds());

type Field = 'serviceUserRegex' | 'userIdRegex';
const set = (bridge: any, field: Field, v: string) => {
  if (field === 'serviceUserRegex') bridge.serviceUserRegex = v;
  else bridge.bridgedOrigins = [{ network: 'slack', userIdRegex: v }];
};

/** What each layer decides for the regex `v` in `field`: true = accepted. */
function layers(field: Field, v: string) {
  const cr = structuredClone(examples().platforms[0]) as any;
  set(cr.spec.bridge, field, v);
  const crd = crds.validate(cr).length === 0;

  const input = examples();
  input.platforms = [cr];
  const rendered = !render(input).conflicts.some((c) => c.kind === 'RetrievalPlatform');

  const obj = webhookPlatform() as any;
  set(obj.spec.bridge, field, v);
  const webhook = review(admissionReview(obj), new StaticClusterView([])).review.response.allowed;

  const config = configJson() as any;
  set(config.bridge, field, v);
  const loader = validateConfig(config).ok;
  return { crd, rendered, webhook, loader };
}

const UNITS = [
  '^',
  '$',
  '\\',
  '(',
  ')',
  '+',
  '*',
  '{',
  '}',
  '?',
  '=',
  '!',
  '<',
  'k',
  '1',
  'a',
  '[',
  ']',
  ' ',
  '.',
  '"',
];
const regexish = fc.oneof(
  fc
    .tuple(
      fc.constantFrom('^', '^', '^', '', '\\^'),
      fc.string({ unit: fc.constantFrom(...UNITS, '\t', 'é', '\n'), maxLength: 10 }),
      fc.constantFrom('$', '$', '$', '', '\\$', '\n$'),
    )
    .map(([a, b, c]) => a + b + c),
  fc.integer({ min: BRIDGE_REGEX_MAX - 3, max: BRIDGE_REGEX_MAX + 2 }).map((n) => `^${'a'.repeat(n - 2)}$`),
);

describe('bridge regexes: CRD, webhook, render and loader refuse the same values', () => {
  for (const field of ['serviceUserRegex', 'userIdRegex'] as const)
    it(`spec.bridge ${field}`, () => {
      const seen = { usable: 0, refused: 0, compileOnly: 0 };
      fc.assert(
        fc.property(regexish, (v) => {
          const fault = bridgeRegexFault(v);
          const got = layers(field, v);
          const expected = {
            crd: fault === undefined || fault === 'does not compile',
            rendered: fault === undefined,
            webhook: fault === undefined,
            loader: fault === undefined,
          };
          assert.deepEqual(got, expected, `${JSON.stringify(v)}: ${fault ?? 'usable'}`);
          seen[fault === undefined ? 'usable' : fault === 'does not compile' ? 'compileOnly' : 'refused']++;
        }),
        { numRuns: 200 },
      );
      assert.ok(seen.usable >= 10 && seen.refused >= 10 && seen.compileOnly >= 1, JSON.stringify(seen));
    });
});
