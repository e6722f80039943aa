/**
 * One rule per field, every layer deciding alike on generated values: the CRD (pattern and CEL, run
 * as kube-apiserver would by crds/validate.ts), the rule module the webhook and the render call, and
 * the server loader that reads the rendered file. Each property fails when one side alone changes.
 * The URL rule is also checked against WHATWG `URL`, which the servers use to reach the endpoint.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { allCrds } from '../crds/schema.ts';
import { crValidator } from '../crds/validate.ts';
import { validateConfig } from '../projector/config.ts';
import { readConfig } from '../retrieval/config.ts';
import {
  labelish,
  labelMapish,
  modelish,
  portish,
  profileish,
  serviceUrlish,
  textNear,
  urlish,
} from '../testkit/common/field-arbitraries.ts';
import { agent, examples } from '../testkit/controller/fixtures.ts';
import { configJson } from '../testkit/projector/fixtures.ts';
import {
  checkAgent,
  checkLabelMap,
  checkPlatform,
  isHttpUrl,
  isModel,
  isProfile,
  LOCAL_PROFILE,
  parseServiceUrl,
} from './index.ts';

const crds = crValidator(allCrds());
const accepts = (r: unknown) => crds.validate(r as Record<string, unknown>).length === 0;
const RUNS = 200;

/** Runs `check` on generated values; both verdicts must occur often enough. */
function agree<T>(arb: fc.Arbitrary<T>, check: (v: T) => boolean, numRuns = RUNS): void {
  const seen = { valid: 0, invalid: 0 };
  fc.assert(
    fc.property(arb, (v) => {
      seen[check(v) ? 'valid' : 'invalid']++;
    }),
    { numRuns },
  );
  const least = Math.floor(numRuns / 20);
  assert.ok(seen.valid >= least && seen.invalid >= least, `one-sided input: ${JSON.stringify(seen)}`);
}

function platform(patch: (spec: Record<string, any>) => void) {
  const p = structuredClone(examples().platforms[0]) as any;
  patch(p.spec);
  return p;
}
const platformOk = (patch: (spec: Record<string, any>) => void) => checkPlatform(platform(patch)).length === 0;

const retrievalJson = (embeddings: Record<string, unknown>) => ({
  version: 1,
  agents: [{ namespace: 'kagent', name: 'knowledge-agent' }],
  embeddings: {
    profile: 'bge-m3-1024-v1',
    url: 'http://h.example/v1/embeddings',
    model: 'BAAI/bge-m3',
    ...embeddings,
  },
});

describe('HTTP URLs: CRD = rule = loaders, and what the rule admits WHATWG URL reads as written', () => {
  it('the rule admits only URLs that parse to the scheme, host and port written, without user, query or fragment', () =>
    agree(urlish, (v) => {
      const rule = isHttpUrl(v);
      if (rule) {
        const u = new URL(v); // throws on a URL the servers could not use
        assert.ok(u.protocol === 'http:' || u.protocol === 'https:', v);
        assert.equal(u.username + u.password + u.search + u.hash, '', v);
        const m = /^https?:\/\/(\[[^\]]+\]|[^/:]+)(?::([0-9]+))?/.exec(v) as RegExpExecArray;
        if (!(m[1] as string).startsWith('[')) assert.equal(u.hostname, (m[1] as string).toLowerCase(), v);
        const port = m[2] === undefined ? undefined : Number(m[2]);
        const dflt = u.protocol === 'https:' ? 443 : 80;
        assert.equal(u.port === '' ? dflt : Number(u.port), port ?? dflt, v);
      }
      return rule;
    }));

  it('RetrievalPlatform.spec.embeddings.url: CRD = webhook/render rule = retrieval loader', () =>
    agree(urlish, (v) => {
      const rule = isHttpUrl(v);
      assert.equal(accepts(platform((s) => (s.embeddings.url = v))), rule, `CRD ${JSON.stringify(v)}`);
      assert.equal(
        platformOk((s) => (s.embeddings.url = v)),
        rule,
        `rule ${JSON.stringify(v)}`,
      );
      assert.equal(readConfig(retrievalJson({ url: v })).ok, rule, `loader ${JSON.stringify(v)}`);
      return rule;
    }));

  it('RetrievalPlatform.spec.liveRoomCheck.homeserverUrl: CRD = rule = projector loader', () =>
    agree(urlish, (v) => {
      const rule = isHttpUrl(v);
      const live = { enabled: true, homeserverUrl: v, tokenSecretRef: { name: 'hs-token', key: 'token' } };
      assert.equal(accepts(platform((s) => (s.liveRoomCheck = live))), rule, `CRD ${JSON.stringify(v)}`);
      assert.equal(
        platformOk((s) => (s.liveRoomCheck = live)),
        rule,
        `rule ${JSON.stringify(v)}`,
      );
      const file = {
        ...configJson(),
        liveRoomCheck: { enabled: true, homeserverUrl: v, accessTokenFile: '/t' },
      };
      assert.equal(validateConfig(file).ok, rule, `loader ${JSON.stringify(v)}`);
      return rule;
    }));

  it('RetrievalPlatform.spec.gateway.mcpUrl (at most 512): CRD = rule', () =>
    agree(urlish, (v) => {
      const rule = isHttpUrl(v, 512);
      assert.equal(accepts(platform((s) => (s.gateway.mcpUrl = v))), rule, JSON.stringify(v));
      assert.equal(
        platformOk((s) => (s.gateway.mcpUrl = v)),
        rule,
        JSON.stringify(v),
      );
      return rule;
    }));

  it('RetrievalPlatform.spec.jwt.jwksUri: CRD = rule (an in-cluster Service URL)', () =>
    agree(serviceUrlish, (v) => {
      const rule = parseServiceUrl(v) !== undefined;
      if (rule) assert.ok(isHttpUrl(v), `a Service URL is an HTTP URL: ${v}`);
      const jwt = { issuer: 'https://issuer.example', jwksUri: v };
      assert.equal(accepts(platform((s) => (s.jwt = jwt))), rule, JSON.stringify(v));
      assert.equal(
        platformOk((s) => (s.jwt = jwt)),
        rule,
        JSON.stringify(v),
      );
      return rule;
    }));
});

describe('embeddings profile and model: CRD = rule = retrieval loader', () => {
  it('profile (the local test embedder refused in a RetrievalPlatform)', () =>
    agree(profileish, (v) => {
      const rule = isProfile(v) && v !== LOCAL_PROFILE;
      assert.equal(accepts(platform((s) => (s.embeddings.profile = v))), rule, `CRD ${JSON.stringify(v)}`);
      assert.equal(
        platformOk((s) => (s.embeddings.profile = v)),
        rule,
        `rule ${JSON.stringify(v)}`,
      );
      // The loader reads the local profile without an endpoint; with one it is the same rule.
      if (v !== LOCAL_PROFILE) assert.equal(readConfig(retrievalJson({ profile: v })).ok, rule, `loader ${v}`);
      return rule;
    }));

  it('model', () =>
    agree(modelish, (v) => {
      const rule = isModel(v);
      assert.equal(accepts(platform((s) => (s.embeddings.model = v))), rule, `CRD ${JSON.stringify(v)}`);
      assert.equal(
        platformOk((s) => (s.embeddings.model = v)),
        rule,
        `rule ${JSON.stringify(v)}`,
      );
      assert.equal(readConfig(retrievalJson({ model: v })).ok, rule, `loader ${JSON.stringify(v)}`);
      return rule;
    }));
});

describe('Kubernetes names, labels and ports: CRD = rule', () => {
  it('namespaces, listeners and the bridge workload (DNS-1123 labels) = rule = projector loader', () =>
    agree(labelish, (v) => {
      const fields: [string, (s: Record<string, any>) => void][] = [
        ['namespaces.retrieval', (s) => (s.namespaces.retrieval = v)],
        ['gateway.localListener', (s) => (s.gateway.localListener = v)],
        ['bridge.workload', (s) => (s.bridge.workload = v)],
      ];
      const rule = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(v);
      for (const [what, patch] of fields) {
        assert.equal(accepts(platform(patch)), rule, `CRD ${what} ${JSON.stringify(v)}`);
        assert.equal(platformOk(patch), rule, `rule ${what} ${JSON.stringify(v)}`);
      }
      const file = configJson() as { bridge: Record<string, unknown> };
      file.bridge = { ...file.bridge, workload: v };
      assert.equal(validateConfig(file).ok, rule, `loader bridge.workload ${JSON.stringify(v)}`);
      return rule;
    }));

  it('RetrievalAgent name (the kagent Agent and route name) = checkAgent', () =>
    agree(labelish, (v) => {
      const a = agent('kagent', v);
      const rule = checkAgent(a).length === 0;
      assert.equal(accepts(a), rule, JSON.stringify(v));
      return rule;
    }));

  it('pod label maps (proxyPodLabels, database.podLabels): CRD and webhook together = rule', () =>
    agree(labelMapish, (v) => {
      const rule = checkLabelMap(v, 'x').length === 0;
      // The CRD checks values and count; the keys only the webhook and the render can check.
      const crd = accepts(platform((s) => (s.gateway.proxyPodLabels = v)));
      if (rule) assert.ok(crd, `CRD ${JSON.stringify(v)}`);
      assert.equal(
        platformOk((s) => (s.gateway.proxyPodLabels = v)),
        rule,
        JSON.stringify(v),
      );
      assert.equal(
        platformOk((s) => (s.database.podLabels = v)),
        rule,
        JSON.stringify(v),
      );
      return rule;
    }));

  it('service and database ports = rule', () =>
    agree(portish, (v) => {
      const rule = Number.isInteger(v) && v >= 1 && v <= 65535;
      for (const patch of [
        (s: Record<string, any>) => (s.projector.port = v),
        (s: Record<string, any>) => (s.database.port = v),
      ]) {
        assert.equal(accepts(platform(patch)), rule, String(v));
        assert.equal(platformOk(patch), rule, String(v));
      }
      return rule;
    }));
});

describe('free text is counted in characters, as kube-apiserver counts maxLength', () => {
  it('RetrievalAgent.spec.description (1,024): CRD = checkAgent, astral characters included', () =>
    agree(textNear(1024), (v) => {
      const a = agent('kagent', 'knowledge-agent', { description: v });
      const rule = checkAgent(a).length === 0;
      assert.equal(accepts(a), rule, `${v.length} UTF-16 units`);
      return rule;
    }));
});
