/**
 * RetrievalPlatform.spec.capability (docs/ledger.md): the CRD schema, the conflict analysis and
 * `admission check` know it; `ledger` renders into both servers' configuration and adds exactly
 * one NetworkPolicy edge (projector → database); `plain` (the default) renders as before.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { stringify } from 'yaml';
import { allCrds } from '../../crds/schema.ts';
import { CrdValidator } from '../../crds/validate.ts';
import { validateConfig } from '../../projector/config.ts';
import { readConfig } from '../../retrieval/config.ts';
import { examples } from '../../testkit/controller/fixtures.ts';
import { admissionCheck } from '../../webhook/cli.ts';
import type { K8sObject, Resources } from '../types.ts';
import { render } from './index.ts';

function withCapability(value: unknown): Resources {
  const r = examples();
  (r.platforms[0]!.spec as unknown as Record<string, unknown>)['capability'] = value;
  return r;
}

const byName = (objects: K8sObject[], kind: string, name: string) =>
  objects.find((o) => o.kind === kind && o.metadata.name === name) as K8sObject & Record<string, any>;

const configOf = (objects: K8sObject[], name: string, key: string) =>
  JSON.parse(byName(objects, 'ConfigMap', name).data[key]);

describe('capability in the CRD schema', () => {
  const v = new CrdValidator();
  for (const c of allCrds()) v.addCrd(c);
  const platform = (capability: unknown) => ({
    apiVersion: 'retrieval.fgentic.dev/v1alpha1',
    kind: 'RetrievalPlatform',
    metadata: { name: 'default' },
    spec: { ...structuredClone(examples().platforms[0]!.spec), capability },
  });
  it('accepts plain and ledger, refuses anything else', () => {
    assert.equal(v.validate(platform('plain')).ok, true);
    assert.equal(v.validate(platform('ledger')).ok, true);
    const r = v.validate(platform('signed'));
    assert.equal(r.ok, false);
    assert.match(r.schemaErrors.join('\n'), /allowed values/);
  });
});

describe('capability in render and conflict analysis', () => {
  it('plain (absent or explicit) renders exactly what the examples render', () => {
    const base = render(examples()).objects;
    assert.deepEqual(render(withCapability('plain')).objects, base);
    assert.equal(configOf(base, 'fgentic-projector-config', 'projector.json').capability, undefined);
    assert.equal(configOf(base, 'fgentic-retrieval-config', 'retrieval.json').capability, undefined);
  });

  it('ledger renders into both servers’ configuration, which both consumers parse as ledger', () => {
    const { objects, conflicts } = render(withCapability('ledger'));
    assert.deepEqual(conflicts, []);
    const projector = configOf(objects, 'fgentic-projector-config', 'projector.json');
    const retrieval = configOf(objects, 'fgentic-retrieval-config', 'retrieval.json');
    assert.equal(projector.capability, 'ledger');
    assert.equal(retrieval.capability, 'ledger');
    const parsed = validateConfig(projector);
    assert.ok(parsed.ok);
    assert.equal(parsed.config.capability, 'ledger');
    const read = readConfig(retrieval);
    assert.ok(read.ok);
    assert.equal(read.value.capability, 'ledger');
  });

  it('ledger adds exactly the projector → database egress, and changes no other object', () => {
    const plain = render(examples()).objects;
    const ledger = render(withCapability('ledger')).objects;
    const egress = (objects: K8sObject[]) =>
      byName(objects, 'NetworkPolicy', 'fgentic-projector-egress').spec.egress as unknown[];
    const added = egress(ledger).filter((r) => !egress(plain).some((p) => JSON.stringify(p) === JSON.stringify(r)));
    assert.equal(egress(ledger).length, egress(plain).length + 1);
    assert.deepEqual(added, [
      {
        to: [
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'postgres' } },
            podSelector: { matchLabels: { 'cnpg.io/cluster': 'platform-pg' } },
          },
        ],
        ports: [{ protocol: 'TCP', port: 5432 }],
      },
    ]);
    // The database edge is the retrieval server's own, unchanged.
    const dbRule = (
      byName(ledger, 'NetworkPolicy', 'knowledge-retrieval-egress').spec.egress as { to?: unknown }[]
    ).find((r) => JSON.stringify(r.to) === JSON.stringify((added[0] as { to: unknown }).to));
    assert.deepEqual(dbRule, added[0]);
    const changed = ledger
      .filter((o, i) => JSON.stringify(o) !== JSON.stringify(plain[i]))
      .map((o) => `${o.kind}/${o.metadata.name}`);
    assert.deepEqual(changed.sort(), [
      'ConfigMap/fgentic-projector-config',
      'ConfigMap/fgentic-retrieval-config',
      'NetworkPolicy/fgentic-projector-egress',
    ]);
  });

  it('an unknown capability is a platform conflict: nothing renders', () => {
    const { objects, conflicts } = render(withCapability('signed'));
    assert.ok(
      conflicts.some((c) => c.kind === 'RetrievalPlatform' && c.reason === 'Invalid' && /capability/.test(c.message)),
    );
    assert.equal(objects.filter((o) => o.kind === 'NetworkPolicy').length, 0);
  });
});

describe('capability in admission check', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fgentic-capability-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  async function run(capability: string): Promise<{ code: number; out: string }> {
    const r = examples();
    const p = r.platforms[0]!;
    const file = join(dir, `${capability}.yaml`);
    writeFileSync(
      file,
      stringify({
        apiVersion: 'retrieval.fgentic.dev/v1alpha1',
        kind: 'RetrievalPlatform',
        metadata: { name: 'default' },
        spec: { ...p.spec, capability },
      }),
    );
    const write = process.stdout.write.bind(process.stdout);
    const ewrite = process.stderr.write.bind(process.stderr);
    let out = '';
    const sink = ((s: string) => {
      out += s;
      return true;
    }) as typeof process.stdout.write;
    process.stdout.write = sink;
    process.stderr.write = sink;
    try {
      return { code: await admissionCheck(['-f', file]), out };
    } finally {
      process.stdout.write = write;
      process.stderr.write = ewrite;
    }
  }

  it('ledger passes; an unknown value is denied', async () => {
    const ok = await run('ledger');
    assert.equal(ok.code, 0, ok.out);
    const bad = await run('signed');
    assert.equal(bad.code, 1, bad.out);
    assert.match(bad.out, /capability/);
  });
});
