/** `kubectl explain` prints each field's `description`: every field of every CRD must have one. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { allCrds } from './schema.ts';

type Node = Record<string, unknown>;

/** Every field path under a schema, as `kubectl explain` addresses it (array items are transparent). */
function fieldPaths(node: Node, path: string, out: { path: string; node: Node }[] = []) {
  const props = node['properties'] as Record<string, Node> | undefined;
  for (const [name, child] of Object.entries(props ?? {})) {
    const p = `${path}.${name}`;
    out.push({ path: p, node: child });
    fieldPaths(child, p, out);
  }
  const items = node['items'] as Node | undefined;
  if (items) fieldPaths(items, path, out);
  const extra = node['additionalProperties'];
  if (extra && typeof extra === 'object') fieldPaths(extra as Node, path, out);
  return out;
}

const rootOf = (crd: Node) => (crd['spec'] as any).versions[0].schema.openAPIV3Schema as Node;
const kindOf = (crd: Node) => (crd['spec'] as any).names.kind as string;

describe('CRD descriptions (kubectl explain)', () => {
  for (const crd of allCrds()) {
    const kind = kindOf(crd);
    it(`${kind} has a top-level description`, () => {
      const d = rootOf(crd)['description'];
      assert.equal(typeof d, 'string');
      assert.ok((d as string).length >= 20, `${kind}: description too short`);
    });
    it(`every field of ${kind} has a non-empty description`, () => {
      const fields = fieldPaths(rootOf(crd), kind);
      assert.ok(fields.length > 10, `${kind}: walked only ${fields.length} fields`);
      const missing = fields
        .filter((f) => typeof f.node['description'] !== 'string' || !(f.node['description'] as string).trim())
        .map((f) => f.path);
      assert.deepEqual(missing, [], `fields without a description:\n${missing.join('\n')}`);
    });
  }

  it('the walk reaches nested fields through arrays and maps (spec.skills.tags, status.conditions.reason)', () => {
    const paths = allCrds().flatMap((c) => fieldPaths(rootOf(c), kindOf(c)).map((f) => f.path));
    for (const p of [
      'RetrievalAgent.spec.skills.tags',
      'RetrievalAgent.status.conditions.reason',
      'RetrievalPlatform.spec.bridge.bridgedOrigins.userIdRegex',
      'PartnerClient.spec.agents.namespace',
    ])
      assert.ok(paths.includes(p), p);
  });

  it('a field without a description is reported by path', () => {
    const crd = structuredClone(allCrds()[0]!) as Node;
    delete (rootOf(crd) as any).properties.spec.properties.skills.items.properties.tags.description;
    const missing = fieldPaths(rootOf(crd), kindOf(crd)).filter((f) => !f.node['description']);
    assert.deepEqual(
      missing.map((f) => f.path),
      ['RetrievalAgent.spec.skills.tags'],
    );
  });
});
