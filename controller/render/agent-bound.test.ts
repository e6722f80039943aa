/**
 * The retrieval server's agent bound at render: 1,000 agents render a retrieval.json the server reads;
 * more than `MAX_AGENTS` render no retrieval configuration at all and report `TooManyAgents` on the
 * platform, never a shortened list.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConfigText } from '../../retrieval/config.ts';
import { MAX_AGENTS } from '../../retrieval/config-limits.ts';
import { agent, examples } from '../testsupport/fixtures.ts';
import type { Resources, RetrievalAgent } from '../types.ts';
import { analyse } from './conflicts.ts';
import { render, renderSharedObjects } from './index.ts';
import { RETRIEVAL_CONFIGMAP } from './server-config.ts';

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

const retrievalJson = (objects: { kind: string; metadata: { name: string } }[]) =>
  (
    objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === RETRIEVAL_CONFIGMAP) as
      | { data: Record<string, string> }
      | undefined
  )?.data['retrieval.json'];

describe('retrieval.json agent bound at render', () => {
  it('1,000 agents: the rendered retrieval.json is read by the server with every agent', () => {
    const r = render(withAgents(1000));
    assert.deepEqual(r.conflicts, []);
    const text = retrievalJson(r.objects);
    assert.ok(text);
    const parsed = parseConfigText(text);
    assert.ok(parsed.ok, parsed.ok ? '' : parsed.problem);
    assert.equal(parsed.config.agents.length, 1000);
  });

  it('one agent over the bound: no retrieval configuration and TooManyAgents, never a shortened list', () => {
    const { model, conflicts } = analyse(withAgents(MAX_AGENTS + 1));
    assert.ok(model);
    const objects = renderSharedObjects(model, conflicts);
    assert.equal(retrievalJson(objects), undefined);
    assert.deepEqual(
      conflicts.map((c) => [c.kind, c.name, c.reason]),
      [['RetrievalPlatform', 'default', 'TooManyAgents']],
    );
    // At the bound it is rendered, and read.
    const at = analyse(withAgents(MAX_AGENTS));
    assert.ok(at.model);
    const atConflicts = [...at.conflicts];
    const text = retrievalJson(renderSharedObjects(at.model, atConflicts));
    assert.ok(text);
    assert.deepEqual(atConflicts, []);
    assert.ok(parseConfigText(text).ok);
  });
});
