/**
 * One validator for our custom resources, three places that apply it: the API-server double (422 on
 * create/update, as kube-apiserver), `fgentic-retrieval admission check` offline, and the tests here.
 * A PartnerClient with an http:// issuer is refused by all of them.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { stringify } from 'yaml';
import { ADMIN_USER, ApiServerDouble } from '../testkit/controller/apiserver.ts';
import { examples, partner, REPO, room } from '../testkit/controller/fixtures.ts';
import { allCrds } from './schema.ts';
import { crValidator } from './validate.ts';

const v = crValidator(allCrds());
const httpIssuer = () => partner('plain-http', { issuer: 'http://issuer.example' });

describe('crValidator: structural schema and CEL rules of our CRDs', () => {
  it('every example resource passes', () => {
    const e = examples();
    for (const r of [...e.platforms, ...e.agents, ...e.rooms, ...e.partners])
      assert.deepEqual(v.validate(r as never), [], `${r.kind} ${r.metadata.name}`);
  });
  it('a PartnerClient issuer must be https (schema pattern)', () => {
    const problems = v.validate(httpIssuer() as never);
    assert.equal(problems.length, 1, problems.join('\n'));
    assert.match(problems[0] as string, /^\/spec\/issuer must match pattern/);
  });
  it('a CEL rule is enforced (allowedClassifications must be one of the two allowed sets)', () => {
    const problems = v.validate(partner('p', { allowedClassifications: ['approved_non_public'] }) as never);
    assert.ok(
      problems.some((p) => p.includes('allowedClassifications must be exactly')),
      problems.join('\n'),
    );
  });
  it('unknown fields are refused (strict field validation, kubectl apply default)', () => {
    const r = room('r', '!r:org-a.example') as never as { spec: Record<string, unknown> };
    r.spec['surprise'] = true;
    assert.ok(v.validate(r as never).some((p) => p.includes('must NOT have additional properties')));
  });
  it('a kind without a served CRD version is refused, never passed', () => {
    assert.deepEqual(v.validate({ apiVersion: 'retrieval.fgentic.dev/v9', kind: 'RetrievalRoom' }), [
      'no served CRD version for retrieval.fgentic.dev/v9 RetrievalRoom',
    ]);
  });
});

describe('the API-server double validates our kinds on create and update', () => {
  const api = new ApiServerDouble();
  before(async () => {
    await api.start();
  });
  after(() => api.stop());
  const post = (body: unknown) =>
    fetch(`http://127.0.0.1:${api.port}/apis/retrieval.fgentic.dev/v1alpha1/partnerclients`, {
      method: 'POST',
      headers: { authorization: `Bearer ${api.token(ADMIN_USER)}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  it('422 Invalid for an http:// issuer; the https one is created', async () => {
    const r = await post(httpIssuer());
    assert.equal(r.status, 422);
    const s = (await r.json()) as { reason: string; message: string; details: { causes: unknown[] } };
    assert.equal(s.reason, 'Invalid');
    assert.match(s.message, /^PartnerClient\.retrieval\.fgentic\.dev "plain-http" is invalid: \/spec\/issuer/);
    assert.equal(s.details.causes.length, 1);
    assert.equal(api.get('retrieval.fgentic.dev/v1alpha1', 'PartnerClient', undefined, 'plain-http'), undefined);
    assert.equal((await post(partner('tls'))).status, 201);
  });

  it('an update that breaks a CEL rule is refused and the stored object stays', async () => {
    const stored = api.get('retrieval.fgentic.dev/v1alpha1', 'PartnerClient', undefined, 'tls') as any;
    const r = await fetch(`http://127.0.0.1:${api.port}/apis/retrieval.fgentic.dev/v1alpha1/partnerclients/tls`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${api.token(ADMIN_USER)}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        ...stored,
        spec: { ...stored.spec, allowedClassifications: ['approved_non_public'] },
      }),
    });
    assert.equal(r.status, 422);
    assert.deepEqual(
      (api.get('retrieval.fgentic.dev/v1alpha1', 'PartnerClient', undefined, 'tls') as any).spec,
      stored.spec,
    );
  });
});

describe('fgentic-retrieval admission check applies the same validator (the binary)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fgentic-crd-check-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('denies a PartnerClient with an http:// issuer offline, exit 1, as the cluster would', () => {
    const file = join(dir, 'partner.yaml');
    writeFileSync(file, stringify(httpIssuer()));
    const r = spawnSync(process.execPath, [join(REPO, 'bin/fgentic-retrieval.mjs'), 'admission', 'check', '-f', file], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /DENY {2}PartnerClient plain-http .*\/spec\/issuer must match pattern.*\[crd-schema\]/);
  });

  it('admits the same PartnerClient with an https issuer (exit 0)', () => {
    const file = join(dir, 'partner-ok.yaml');
    writeFileSync(file, stringify(partner('tls')));
    const r = spawnSync(process.execPath, [join(REPO, 'bin/fgentic-retrieval.mjs'), 'admission', 'check', '-f', file], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /ALLOW PartnerClient tls/);
  });
});
