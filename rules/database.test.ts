/**
 * `RetrievalPlatform.spec.database` replica settings (rules/database.ts): the CRD schema (pattern,
 * CEL, bounds, enum, list limits, run as the apiserver would by crds/validate.ts), the reconciler's
 * conflict analysis, the admission webhook and the retrieval server's loader decide alike on the
 * same generated values, and a valid setting renders into retrieval.json with its defaults filled
 * in. Every URL the rule admits is read by node-postgres as written and without a credential.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parse as parseConnectionString } from 'pg-connection-string';
import { render } from '../controller/render/index.ts';
import type { K8sObject } from '../controller/types.ts';
import { allCrds } from '../crds/schema.ts';
import { crValidator } from '../crds/validate.ts';
import { readConfig } from '../retrieval/config.ts';
import { LOCAL_PROFILE } from '../retrieval/embeddings/local.ts';
import { databaseUrlish } from '../testkit/common/field-arbitraries.ts';
import { examples } from '../testkit/controller/fixtures.ts';
import { admissionReview, platform as webhookPlatform } from '../testkit/webhook.ts';
import { review } from '../webhook/review.ts';
import { StaticClusterView } from '../webhook/view.ts';
import {
  checkReplicaSettings,
  DEFAULT_REPLICA_SETTINGS,
  isDatabaseUrl,
  MAX_REPLICA_LAG,
  MAX_REPLICAS,
  replicaSettings,
} from './database.ts';

const crds = crValidator(allCrds());
const RUNS = 200;

function seen(): { valid: number; invalid: number; check(runs: number): void } {
  return {
    valid: 0,
    invalid: 0,
    check(runs) {
      const least = Math.floor(runs / 20);
      assert.ok(this.valid >= least && this.invalid >= least, `one-sided input: ${this.valid}/${this.invalid}`);
    },
  };
}

const retrievalJsonOf = (objects: K8sObject[]) =>
  JSON.parse(
    (
      objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'fgentic-retrieval-config') as K8sObject & {
        data: Record<string, string>;
      }
    ).data['retrieval.json']!,
  );

const lag = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: MAX_REPLICA_LAG.min - 50, max: MAX_REPLICA_LAG.min + 2_000 }) },
  { weight: 2, arbitrary: fc.integer({ min: MAX_REPLICA_LAG.max - 50, max: MAX_REPLICA_LAG.max + 50 }) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      MAX_REPLICA_LAG.min - 1,
      MAX_REPLICA_LAG.min,
      MAX_REPLICA_LAG.max,
      MAX_REPLICA_LAG.max + 1,
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom(1.5, -1, 0, '1000', null) },
);
const settings = fc.record(
  {
    replicaUrls: fc.oneof(
      { weight: 6, arbitrary: fc.array(databaseUrlish, { maxLength: 3 }) },
      { weight: 1, arbitrary: fc.constant(['postgres://r.example/db', 'postgres://r.example/db']) },
      {
        weight: 1,
        arbitrary: fc
          .integer({ min: MAX_REPLICAS, max: MAX_REPLICAS + 1 })
          .map((n) => Array.from({ length: n }, (_, i) => `postgres://r${i}.example/knowledge`)),
      },
    ),
    maxReplicaLagMilliseconds: lag,
    pooler: fc.constantFrom('none', 'transaction', 'session', 'Transaction', ''),
  },
  { requiredKeys: [] },
);

describe('spec.database replicas: CRD = conflicts = webhook = retrieval loader = the rule', () => {
  it('every consumer accepts exactly what checkReplicaSettings accepts (property)', () => {
    const s = seen();
    fc.assert(
      fc.property(settings, (d) => {
        const rule = checkReplicaSettings(d, 'spec.database').length === 0;
        s[rule ? 'valid' : 'invalid']++;
        const label = JSON.stringify(d);
        const r = examples();
        const spec = r.platforms[0]!.spec as unknown as Record<string, unknown>;
        spec['database'] = { ...(spec['database'] as object | undefined), ...d };
        const cr = {
          apiVersion: 'retrieval.fgentic.dev/v1alpha1',
          kind: 'RetrievalPlatform',
          metadata: { name: 'default' },
          spec,
        };
        assert.equal(crds.validate(cr as unknown as Record<string, unknown>).length === 0, rule, `CRD ${label}`);
        const rendered = render(r);
        assert.equal(!rendered.conflicts.some((c) => c.kind === 'RetrievalPlatform'), rule, `conflicts ${label}`);
        const wp = webhookPlatform();
        (wp['spec'] as Record<string, unknown>)['database'] = d;
        assert.equal(
          review(admissionReview(wp), new StaticClusterView([])).review.response.allowed,
          rule,
          `webhook ${label}`,
        );
        const loaded = readConfig({
          version: 1,
          agents: [{ namespace: 'kagent', name: 'knowledge-agent' }],
          embeddings: { profile: LOCAL_PROFILE },
          database: d,
        });
        assert.equal(loaded.ok, rule, `retrieval ${label}`);
        if (rule && loaded.ok) {
          const expected = replicaSettings(d)!;
          assert.deepEqual(loaded.value.database, expected);
          const direct = expected.replicaUrls.length === 0 && expected.pooler === 'none';
          // What renders is the rule's own reading, and the server reads it back unchanged.
          const json = retrievalJsonOf(rendered.objects);
          assert.deepEqual(json.database, direct ? undefined : expected, `render ${label}`);
          const back = readConfig(json);
          assert.ok(back.ok);
          assert.deepEqual(back.value.database, direct ? DEFAULT_REPLICA_SETTINGS : expected);
        }
      }),
      { numRuns: RUNS },
    );
    s.check(RUNS);
  });

  it('a URL the rule admits is read by node-postgres as written, with no user or password (property)', () => {
    const s = seen();
    fc.assert(
      fc.property(databaseUrlish, (u) => {
        const ok = isDatabaseUrl(u);
        s[ok ? 'valid' : 'invalid']++;
        if (!ok) return;
        // sslrootcert is read as a file when parsed: point it at one that exists.
        const c = parseConnectionString(u.replace(/sslrootcert=[^&]*/, 'sslrootcert=/dev/null'));
        assert.ok(!c.user && !c.password, u);
        const host = new URL(u.replace(/^postgres(ql)?:/, 'http:')).hostname.replace(/^\[|\]$/g, '');
        assert.equal(c.host?.toLowerCase(), host.toLowerCase(), u);
        const port = /:\/\/[^/?]*?:(\d+)(?:[/?]|$)/.exec(u)?.[1];
        assert.equal(c.port || undefined, port, u);
      }),
      { numRuns: 400 },
    );
    s.check(400);
  });

  it('named cases: a credential in any form is refused, and the problem never echoes the URL', () => {
    for (const u of [
      'postgres://u:hunter2@h/db',
      'postgres://u@h/db',
      'postgres://h/db?password=hunter2',
      'postgres://h/db?sslmode=require&user=x',
      'postgres://h/db?sslpassword=hunter2',
    ]) {
      assert.equal(isDatabaseUrl(u), false, u);
      const problems = checkReplicaSettings({ replicaUrls: [u] }, 'spec.database');
      assert.equal(problems[0]?.path, 'spec.database.replicaUrls[0]');
      assert.ok(!JSON.stringify(problems).includes('hunter2'));
    }
    assert.equal(
      isDatabaseUrl(
        'postgres://platform-pg-ro.postgres.svc.cluster.local:5432/knowledge?sslmode=verify-full&sslrootcert=/var/run/secrets/fgentic/pg-ca/ca.crt',
      ),
      true,
    );
    assert.deepEqual(replicaSettings(undefined), DEFAULT_REPLICA_SETTINGS);
  });

  it('no replica and no pooler renders nothing, whatever the bound', () => {
    const r = examples();
    (r.platforms[0]!.spec as unknown as Record<string, unknown>)['database'] = {
      maxReplicaLagMilliseconds: 500,
    };
    assert.equal(retrievalJsonOf(render(r).objects).database, undefined);
  });
});
