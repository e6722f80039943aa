/**
 * The list limits of rules/limits.ts hold alike in every layer: at the limit the CRD admits the
 * resource, the webhook allows it, the render reports no conflict and the projector's loader reads
 * the configuration; one entry more and each of them refuses. A layer that changes its number alone
 * fails here.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { render } from '../controller/render/index.ts';
import type { Resources } from '../controller/types.ts';
import { allCrds } from '../crds/schema.ts';
import { crValidator } from '../crds/validate.ts';
import { validateConfig } from '../projector/config.ts';
import { examples, partner } from '../testkit/controller/fixtures.ts';
import { configJson } from '../testkit/projector/fixtures.ts';
import { admissionReview } from '../testkit/webhook.ts';
import { review } from '../webhook/review.ts';
import { StaticClusterView } from '../webhook/view.ts';
import { MAX_BRIDGED_ORIGINS, MAX_LOCAL_GROUPS, MAX_PARTNER_AGENTS } from './index.ts';

const crds = crValidator(allCrds());
const names = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

interface Case {
  readonly limit: number;
  /** Resources whose one list has `n` entries; the changed resource is the first of its kind. */
  readonly resources: (n: number) => { input: Resources; changed: object; kind: string };
  /** projector.json with the same list of `n` entries. */
  readonly config: (n: number) => Record<string, any>;
}

const CASES: Record<string, Case> = {
  'bridged origins': {
    limit: MAX_BRIDGED_ORIGINS,
    resources: (n) => {
      const input = examples();
      const p = input.platforms[0]!;
      p.spec.bridge.bridgedOrigins = names('net', n).map((network) => ({ network, userIdRegex: '^@x:y$' }));
      return { input, changed: p, kind: 'RetrievalPlatform' };
    },
    config: (n) => {
      const c = configJson() as any;
      c.bridge.bridgedOrigins = names('net', n).map((network) => ({ network, userIdRegex: '^@x:y$' }));
      return c;
    },
  },
  'local groups': {
    limit: MAX_LOCAL_GROUPS,
    resources: (n) => {
      const input = examples();
      const p = input.platforms[0]!;
      p.spec.localGroups = names('group', n);
      return { input, changed: p, kind: 'RetrievalPlatform' };
    },
    config: (n) => ({ ...configJson(), localGroups: names('group', n) }),
  },
  'agents of a partner': {
    limit: MAX_PARTNER_AGENTS,
    resources: (n) => {
      const input = examples();
      const p = partner('many', { agents: names('agent', n).map((name) => ({ namespace: 'kagent', name })) });
      input.partners = [p];
      return { input, changed: p, kind: 'PartnerClient' };
    },
    config: (n) => {
      const c = configJson() as any;
      c.partners[0].agents = names('agent', n).map((name) => ({ namespace: 'kagent', name }));
      return c;
    },
  },
};

function layers(c: Case, n: number) {
  const { input, changed, kind } = c.resources(n);
  const crd = crds.validate(changed as Record<string, unknown>);
  const conflicts = render(input).conflicts.filter((x) => x.kind === kind);
  const webhook = review(admissionReview(changed as never), new StaticClusterView([])).review.response;
  const loader = validateConfig(c.config(n));
  return {
    crd: crd.length === 0,
    render: conflicts.length === 0,
    webhook: webhook.allowed,
    loader: loader.ok,
    detail: JSON.stringify({ crd, conflicts, webhook: webhook.status?.message, loader }),
  };
}

describe('list limits: CRD, webhook, render and loader agree', () => {
  for (const [what, c] of Object.entries(CASES))
    it(`${what}: ${c.limit} accepted everywhere, ${c.limit + 1} refused everywhere`, () => {
      const at = layers(c, c.limit);
      assert.deepEqual([at.crd, at.render, at.webhook, at.loader], [true, true, true, true], at.detail);
      const over = layers(c, c.limit + 1);
      assert.deepEqual([over.crd, over.render, over.webhook, over.loader], [false, false, false, false], over.detail);
    });
});
