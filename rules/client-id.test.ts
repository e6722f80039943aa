/**
 * A PartnerClient `azp` or `audience` that the projection cannot carry (a space, a non-ASCII or a
 * control character, more than 255 characters) is refused at apply time by every layer that reads it:
 * the CRD schema, the admission webhook, `admission check` (the binary, offline), the reconciler's
 * render and the projector's loader. Before this rule such a partner was admitted everywhere and then
 * denied on every request at run time (reason `client`).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { stringify } from 'yaml';
import { checkClient } from '../contract/index.ts';
import { render } from '../controller/render/index.ts';
import type { K8sObject, PartnerClient } from '../controller/types.ts';
import { allCrds } from '../crds/schema.ts';
import { crValidator } from '../crds/validate.ts';
import { validateConfig } from '../projector/config.ts';
import { examples, partner, REPO } from '../testkit/controller/fixtures.ts';
import { configJson } from '../testkit/projector/fixtures.ts';
import { admissionReview } from '../testkit/webhook.ts';
import { review } from '../webhook/review.ts';
import { StaticClusterView } from '../webhook/view.ts';
import { isClientText } from './index.ts';

const BAD = ['org b', 'org-b-ä2a', 'org\tb', 'x'.repeat(256)];
const FIELDS = ['azp', 'audience'] as const;

/** The example partner with one identifier replaced. */
function examplePartner(field: (typeof FIELDS)[number], value: string): PartnerClient {
  const p = structuredClone(examples().partners[0]) as PartnerClient;
  p.spec[field] = value;
  return p;
}

describe('client identifiers the projection cannot carry are refused at apply time', () => {
  it('the contract itself refuses them in client.azp / client.audience (the run-time denial)', () => {
    for (const v of BAD) {
      assert.equal(isClientText(v), false, JSON.stringify(v));
      const c = { issuer: 'https://issuer.example', audience: 'a', azp: 'b', policy_id: 'org-b' };
      assert.ok('ok' in checkClient({ ...c, azp: v }));
      assert.ok('ok' in checkClient({ ...c, audience: v }));
    }
  });

  const crds = crValidator(allCrds());
  it('the CRD schema refuses them', () => {
    for (const field of FIELDS)
      for (const v of BAD) {
        const problems = crds.validate(partner('p', { [field]: v }) as never);
        assert.ok(
          problems.some((p) => p.startsWith(`/spec/${field} must`)),
          `${field}=${JSON.stringify(v)}: ${problems.join('; ')}`,
        );
      }
  });

  it('the admission webhook refuses them (client-id)', () => {
    for (const field of FIELDS)
      for (const v of BAD) {
        const r = review(admissionReview(partner('p', { [field]: v }) as never), new StaticClusterView([])).review
          .response;
        assert.equal(r.allowed, false);
        assert.match(r.status?.message ?? '', new RegExp(`spec\\.${field}: .*\\[client-id\\]`));
      }
  });

  it('render reports the partner Invalid and leaves it out of the projector registry', () => {
    for (const field of FIELDS)
      for (const v of BAD) {
        const input = examples();
        const bad = examplePartner(field, v);
        input.partners[0] = bad;
        const { objects, conflicts } = render(input);
        assert.deepEqual(
          conflicts.filter((c) => c.name === bad.metadata.name).map((c) => c.reason),
          ['Invalid'],
        );
        const cm = objects.find((o: K8sObject) => o.metadata.name === 'fgentic-projector-config') as unknown as {
          data: Record<string, string>;
        };
        const cfg = JSON.parse(cm.data['projector.json'] as string) as { partners: { azp: string }[] };
        assert.ok(!cfg.partners.some((p) => p.azp === bad.spec.azp));
      }
  });

  it('the projector refuses a configuration that carries one (load error, not a per-request denial)', () => {
    for (const field of FIELDS)
      for (const v of BAD) {
        const c = configJson() as { partners: Record<string, unknown>[] };
        (c.partners[0] as Record<string, unknown>)[field] = v;
        const r = validateConfig(c);
        assert.equal(r.ok, false);
        assert.match(r.ok ? '' : r.error, new RegExp(`^partners\\[0\\]\\.${field}: `));
      }
    assert.equal(validateConfig(configJson()).ok, true);
  });

  describe('fgentic-retrieval admission check (the binary, offline)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fgentic-client-id-'));
    after(() => rmSync(dir, { recursive: true, force: true }));
    it('denies a PartnerClient whose azp has a space, exit 1', () => {
      const file = join(dir, 'partner.yaml');
      writeFileSync(file, stringify(partner('spaced', { azp: 'org b' })));
      const r = spawnSync(
        process.execPath,
        [join(REPO, 'bin/fgentic-retrieval.mjs'), 'admission', 'check', '-f', file],
        { encoding: 'utf8', timeout: 120_000 },
      );
      assert.equal(r.status, 1, r.stdout + r.stderr);
      assert.match(r.stdout, /DENY {2}PartnerClient spaced .*\/spec\/azp must match pattern/);
    });
  });
});
