/**
 * The one agent bound (rules/agent-bound.ts) at render: up to `MAX_AGENTS` agents render a
 * projector.json and a retrieval.json that both servers read; one more renders neither configuration
 * and reports `TooManyAgents` on the platform, never a shortened list.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assembleConfig, REGISTRY_SHARD_PREFIX } from '../../projector/registry.ts';
import { parseConfigText } from '../../retrieval/config.ts';
import { MAX_AGENTS } from '../../rules/index.ts';
import { agent, examples } from '../testsupport/fixtures.ts';
import type { Resources, RetrievalAgent } from '../types.ts';
import { analyse } from './conflicts.ts';
import { render, renderSharedObjects } from './index.ts';
import { PROJECTOR_CONFIGMAP, RETRIEVAL_CONFIGMAP } from './server-config.ts';

function withAgents(n: number): Resources {
  const input = examples();
  const tpl = agent('kagent', 'template');
  const many: RetrievalAgent[] = Array.from({ length: n }, (_, i) => ({
    ...tpl,
    metadata: { namespace: 'kagent', name: `agent-${i}` },
  }));
  input.agents = many;
  return input;
}

const configText = (objects: { kind: string; metadata: { name: string } }[], name: string, key: string) =>
  (
    objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === name) as
      | { data: Record<string, string> }
      | undefined
  )?.data[key];
const retrievalJson = (objects: { kind: string; metadata: { name: string } }[]) =>
  configText(objects, RETRIEVAL_CONFIGMAP, 'retrieval.json');
const projectorJson = (objects: { kind: string; metadata: { name: string } }[]) =>
  configText(objects, PROJECTOR_CONFIGMAP, 'projector.json');

describe('agent bound at render', () => {
  it('1,000 agents: the rendered retrieval.json is read by the server with every agent', () => {
    const r = render(withAgents(1000));
    assert.deepEqual(r.conflicts, []);
    const text = retrievalJson(r.objects);
    assert.ok(text);
    const parsed = parseConfigText(text);
    assert.ok(parsed.ok, parsed.ok ? '' : parsed.problem);
    assert.equal(parsed.config.agents.length, 1000);
  });

  it('one agent over the bound: neither configuration and TooManyAgents, never a shortened list', () => {
    const { model, conflicts } = analyse(withAgents(MAX_AGENTS + 1));
    assert.ok(model);
    const objects = renderSharedObjects(model, conflicts);
    assert.equal(retrievalJson(objects), undefined);
    assert.equal(projectorJson(objects), undefined);
    assert.deepEqual(
      conflicts.map((c) => [c.kind, c.name, c.reason]),
      [['RetrievalPlatform', 'default', 'TooManyAgents']],
    );
    // At the bound it is rendered, and read.
    const at = analyse(withAgents(MAX_AGENTS));
    assert.ok(at.model);
    const atConflicts = [...at.conflicts];
    const rendered = renderSharedObjects(at.model, atConflicts);
    const text = retrievalJson(rendered);
    assert.ok(text);
    assert.deepEqual(atConflicts, []);
    assert.ok(parseConfigText(text).ok);
    // At the bound projector.json alone exceeds the inline limit: the (empty) registry is sharded.
    const shards = new Map(
      rendered
        .filter((o) => o.metadata.name.startsWith(REGISTRY_SHARD_PREFIX))
        .map((o) => [
          o.metadata.name,
          (o as unknown as { data: Record<string, string> }).data['registry.json'] as string,
        ]),
    );
    const projector = assembleConfig(projectorJson(rendered) ?? '', shards);
    assert.ok(projector.ok, projector.ok ? '' : projector.error);
    assert.equal(projector.config.agents.length, MAX_AGENTS);
  });
});
