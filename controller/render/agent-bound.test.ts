/**
 * The one agent bound (rules/agent-bound.ts) at render: up to `MAX_AGENTS` agents render a
 * projector.json and a retrieval.json that both servers read; past it the newest RetrievalAgent is
 * refused with `TooManyAgents` on itself, and every other agent is still served (one agent too
 * many must not deny every agent).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assembleConfig, REGISTRY_SHARD_PREFIX } from '../../projector/registry.ts';
import { parseConfigText } from '../../retrieval/config.ts';
import { MAX_AGENTS } from '../../rules/index.ts';
import { agent, examples } from '../../testkit/controller/fixtures.ts';
import type { Resources, RetrievalAgent } from '../types.ts';
import { analyse } from './conflicts.ts';
import { render, renderSharedObjects } from './index.ts';
import { PROJECTOR_CONFIGMAP, RETRIEVAL_CONFIGMAP } from './server-config.ts';

/** projector.json and its registry shards, assembled as the projector reads them. */
function assembled(objects: { kind: string; metadata: { name: string } }[]) {
  const shards = new Map(
    objects
      .filter((o) => o.metadata.name.startsWith(REGISTRY_SHARD_PREFIX))
      .map((o) => [
        o.metadata.name,
        (o as unknown as { data: Record<string, string> }).data['registry.json'] as string,
      ]),
  );
  return assembleConfig(projectorJson(objects) ?? '', shards);
}

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

  it('one agent over the bound: that agent refused (TooManyAgents), every other agent served', () => {
    const input = withAgents(MAX_AGENTS + 1);
    // The newest is the one refused, as the webhook refuses the one created past the bound.
    input.agents.forEach((a, i) => {
      (a.metadata as { creationTimestamp?: string }).creationTimestamp = new Date(
        Date.UTC(2026, 0, 1, 0, 0, i),
      ).toISOString();
    });
    const newest = input.agents[0] as RetrievalAgent;
    (newest.metadata as { creationTimestamp?: string }).creationTimestamp = '2027-01-01T00:00:00Z';
    const { model, conflicts } = analyse(input);
    assert.ok(model);
    const objects = renderSharedObjects(model, conflicts);
    assert.deepEqual(
      conflicts.map((c) => [c.kind, c.name, c.reason]),
      [['RetrievalAgent', newest.metadata.name, 'TooManyAgents']],
    );
    const retrieval = parseConfigText(retrievalJson(objects) ?? '');
    assert.ok(retrieval.ok, retrieval.ok ? '' : retrieval.problem);
    assert.equal(retrieval.config.agents.length, MAX_AGENTS);
    assert.ok(!retrieval.config.agents.some((a) => a.name === newest.metadata.name));
    // Past the inline limit projector.json is a manifest: read it with its shards, as the projector does.
    const served = assembled(objects);
    assert.ok(served.ok, served.ok ? '' : served.error);
    assert.equal(served.config.agents.length, MAX_AGENTS);
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
