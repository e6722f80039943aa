/** Our CRDs: generated files current, valid apiextensions v1, and their schemas/CEL rules enforce the invariants. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition';
import { parse } from 'yaml';
import { CRD_DIR, generatedFiles } from './generate.ts';
import { allCrds } from './schema.ts';
import { CrdValidator } from './validate.ts';

const v = new CrdValidator();
for (const c of allCrds()) v.addCrd(c);
const example = (file: string) =>
  readFileSync(join(CRD_DIR, '../examples', file), 'utf8')
    .split(/^---$/m)
    .map((d) => parse(d) as Record<string, unknown>)
    .filter(Boolean);
const platform = example('platform.yaml')[0] as Record<string, any>;
const agent = example('agent.yaml')[0] as Record<string, any>;
const publicRoom = example('rooms.yaml')[0] as Record<string, any>;
const agreedRoom = example('rooms.yaml')[1] as Record<string, any>;
const partner = example('partners.yaml')[0] as Record<string, any>;

function check(obj: Record<string, unknown>) {
  return v.validate(obj);
}
function mutate<T>(o: T, f: (c: any) => void): T {
  const c = structuredClone(o);
  f(c);
  return c;
}
function rejects(obj: Record<string, unknown>, what: RegExp) {
  const r = check(obj);
  assert.equal(r.ok, false, `expected rejection (${what})`);
  assert.match([...r.schemaErrors, ...r.cel.failed].join('\n'), what);
}

describe('generated CRD files', () => {
  it('crds/*.yaml and kustomization.yaml equal the output of crds/schema.ts', () => {
    for (const [file, text] of generatedFiles()) assert.equal(readFileSync(join(CRD_DIR, file), 'utf8'), text, file);
  });
  it('kustomization lists every CRD', () => {
    const k = parse(readFileSync(join(CRD_DIR, 'kustomization.yaml'), 'utf8')) as { resources: string[] };
    assert.deepEqual(k.resources, [
      'partnerclients.retrieval.fgentic.dev.yaml',
      'retrievalagents.retrieval.fgentic.dev.yaml',
      'retrievalplatforms.retrieval.fgentic.dev.yaml',
      'retrievalrooms.retrieval.fgentic.dev.yaml',
    ]);
  });
});

describe('CRDs are valid apiextensions.k8s.io/v1', () => {
  for (const crd of allCrds()) {
    const name = (crd['metadata'] as { name: string }).name;
    it(`${name} validates as a CustomResourceDefinition (kubernetes-models)`, () => {
      new CustomResourceDefinition(crd as never).validate();
    });
    it(`${name} has a status subresource, printer columns and a Ready column`, () => {
      const ver = (crd['spec'] as any).versions[0];
      assert.deepEqual(ver.subresources, { status: {} });
      assert.ok(ver.additionalPrinterColumns.some((c: any) => c.name === 'Ready'));
      assert.ok(ver.schema.openAPIV3Schema.properties.status.properties.conditions);
    });
  }
  it('RetrievalAgent is namespaced, the rest cluster-scoped', () => {
    const scopes = Object.fromEntries(allCrds().map((c: any) => [c.spec.names.kind, c.spec.scope]));
    assert.deepEqual(scopes, {
      RetrievalAgent: 'Namespaced',
      RetrievalRoom: 'Cluster',
      PartnerClient: 'Cluster',
      RetrievalPlatform: 'Cluster',
    });
  });
});

describe('examples pass our CRD schemas and CEL rules', () => {
  for (const o of [platform, agent, publicRoom, agreedRoom, partner]) {
    it(`${o['kind']} ${o['metadata'].name}`, () => {
      const r = check(o as Record<string, unknown>);
      assert.deepEqual([...r.schemaErrors, ...r.cel.failed], []);
      assert.equal(r.cel.unevaluated.length, 0);
      assert.ok(r.cel.passed > 0 || o['kind'] === 'RetrievalAgent');
    });
  }
});

describe('RetrievalRoom invariants', () => {
  it('defaults allowedClassifications to ["public"] (the safe default)', () => {
    const r = check(mutate(publicRoom, (c) => delete c.spec.allowedClassifications));
    assert.equal(r.ok, true);
  });
  it('approved_non_public needs agreementRef', () =>
    rejects(
      mutate(agreedRoom, (c) => delete c.spec.agreementRef),
      /agreementRef is required/,
    ));
  it('agreementRef is forbidden on a public-only room', () =>
    rejects(
      mutate(publicRoom, (c) => (c.spec.agreementRef = 'x')),
      /agreementRef is required/,
    ));
  it('classifications must be one of the two exact lists', () => {
    rejects(
      mutate(agreedRoom, (c) => (c.spec.allowedClassifications = ['public', 'approved_non_public'])),
      /exactly/,
    );
    rejects(
      mutate(publicRoom, (c) => (c.spec.allowedClassifications = ['approved_non_public'])),
      /exactly|agreementRef/,
    );
    rejects(
      mutate(publicRoom, (c) => (c.spec.allowedClassifications = ['restricted'])),
      /allowed values|enum/,
    );
  });
  it('accepts legacy and v12 room IDs, rejects others', () => {
    assert.equal(check(mutate(publicRoom, (c) => (c.spec.roomId = '!abc:matrix.org:8448'))).ok, true);
    assert.equal(check(mutate(publicRoom, (c) => (c.spec.roomId = `!${'A'.repeat(43)}`))).ok, true);
    for (const bad of ['room:org-a.example', `!${'A'.repeat(42)}`, `!${'A'.repeat(44)}`, '!:org-a.example', '!a b:x'])
      rejects(
        mutate(publicRoom, (c) => (c.spec.roomId = bad)),
        /pattern/,
      );
  });
  it('rejects unknown fields', () =>
    rejects(
      mutate(publicRoom, (c) => (c.spec.bogus = 1)),
      /additional properties/,
    ));
});

describe('PartnerClient invariants', () => {
  it('groups must sit under partner/<policyId>/', () => {
    rejects(
      mutate(partner, (c) => (c.spec.groups = ['partner/org-c/docs'])),
      /partner\/<policyId>/,
    );
    rejects(
      mutate(partner, (c) => (c.spec.groups = ['docs'])),
      /pattern/,
    );
    rejects(
      mutate(partner, (c) => (c.spec.groups = [])),
      /fewer than 1/,
    );
  });
  it('issuer must be an https URL of at most 512 characters', () => {
    rejects(
      mutate(partner, (c) => (c.spec.issuer = 'http://issuer.example')),
      /pattern/,
    );
    rejects(
      mutate(partner, (c) => (c.spec.issuer = `https://a.example/${'x'.repeat(500)}`)),
      /more than 512 characters/,
    );
  });
  it('policyId is a DNS-1123 label', () =>
    rejects(
      mutate(partner, (c) => (c.spec.policyId = 'Org_B')),
      /pattern/,
    ));
  it('approved_non_public needs agreementRef', () =>
    rejects(
      mutate(partner, (c) => (c.spec.allowedClassifications = ['approved_non_public', 'public'])),
      /agreementRef/,
    ));
});

describe('RetrievalPlatform invariants', () => {
  it('must be named default', () =>
    rejects(
      mutate(platform, (c) => (c.metadata.name = 'other')),
      /must be named default/,
    ));
  it('publicRetrievalTimeoutSeconds is 1-60', () => {
    rejects(
      mutate(platform, (c) => (c.spec.publicRetrievalTimeoutSeconds = 0)),
      /must be >= 1/,
    );
    rejects(
      mutate(platform, (c) => (c.spec.publicRetrievalTimeoutSeconds = 61)),
      /must be <= 60/,
    );
    assert.equal(check(mutate(platform, (c) => (c.spec.publicRetrievalTimeoutSeconds = 60))).ok, true);
  });
  it('mcpListener and mcpUrl are optional; listener names are DNS-1123 labels', () => {
    assert.equal(
      check(
        mutate(platform, (c) => {
          delete c.spec.gateway.mcpListener;
          delete c.spec.gateway.mcpUrl;
        }),
      ).ok,
      true,
    );
    rejects(
      mutate(platform, (c) => (c.spec.gateway.mcpListener = 'MCP_listener')),
      /pattern/,
    );
    rejects(
      mutate(platform, (c) => (c.spec.gateway.mcpUrl = 'ftp://x')),
      /pattern/,
    );
  });
  it('local groups may not use partner/', () =>
    rejects(
      mutate(platform, (c) => (c.spec.localGroups = ['partner/org-b/docs'])),
      /partner\/ namespace/,
    ));
  it('jwt needs exactly one JWKS source', () => {
    rejects(
      mutate(platform, (c) => delete c.spec.jwt.jwksUri),
      /exactly one of jwksSecretRef or jwksUri/,
    );
    rejects(
      mutate(platform, (c) => (c.spec.jwt.jwksSecretRef = { name: 'jwks', key: 'jwks.json' })),
      /exactly one of jwksSecretRef or jwksUri/,
    );
  });
  it('a2aBackend is controller or agentService, default controller', () => {
    rejects(
      mutate(platform, (c) => (c.spec.a2aBackend = 'direct')),
      /allowed values/,
    );
    assert.equal(check(mutate(platform, (c) => delete c.spec.a2aBackend)).ok, true);
  });
  it('an enabled live room check needs a homeserver and a token', () =>
    rejects(
      mutate(platform, (c) => (c.spec.liveRoomCheck = { enabled: true })),
      /homeserverUrl/,
    ));
});

describe('RetrievalAgent invariants', () => {
  it('requires the MCP API key Secret reference', () =>
    rejects(
      mutate(agent, (c) => delete c.spec.mcpApiKeySecretRef),
      /mcpApiKeySecretRef/,
    ));
  it('rate limit is bounded', () =>
    rejects(
      mutate(agent, (c) => (c.spec.rateLimit.requestsPerMinute = 0)),
      /must be >= 1/,
    ));
});
