/**
 * The one agent bound (rules/agent-bound.ts, derived from the 1 MiB ConfigMap data limit) holds for
 * retrieval.json: a file with the most agents the parser accepts, each entry as long as it can be,
 * and every other field at its maximum, still fits the ConfigMap; one agent more is refused.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  CONFIG_DATA_LIMIT,
  RETRIEVAL_AGENT_ENTRY_BYTES as MAX_AGENT_ENTRY_BYTES,
  MAX_AGENTS,
  RETRIEVAL_RESERVED_BYTES as RESERVED_BYTES,
} from '../rules/agent-bound.ts';
import { parseConfigText } from './config.ts';

const label = (prefix: string, i: number) => `${prefix}${String(i).padStart(8, '0')}`.padEnd(63, 'x');
const agents = (n: number, long = false) =>
  Array.from({ length: n }, (_, i) =>
    long ? { namespace: label('ns', i), name: label('agent', i) } : { namespace: 'kagent', name: `a-${i}` },
  );
const embeddings = { profile: 'bge-m3-1024-v1', url: 'http://e.example/v1/embeddings', model: 'BAAI/bge-m3' };
const bytes = (s: string) => Buffer.byteLength('retrieval.json') + Buffer.byteLength(s);

describe('retrieval.json agent bound', () => {
  it('1,000 agents are read', () => {
    const r = parseConfigText(JSON.stringify({ version: 1, agents: agents(1000), embeddings }));
    assert.ok(r.ok);
    assert.equal(r.config.agents.length, 1000);
  });

  it('the bound is above the 1,000-agent scale, and at it the worst-case file fits and is read', () => {
    // projector.json, with its longer entries, sets the bound; retrieval.json has room to spare.
    assert.equal(MAX_AGENTS, 1884);
    assert.ok(MAX_AGENTS * MAX_AGENT_ENTRY_BYTES + RESERVED_BYTES <= CONFIG_DATA_LIMIT);
    const worst = {
      version: 1,
      agents: agents(MAX_AGENTS, true),
      embeddings: {
        profile: `p${'x'.repeat(62)}1`,
        url: `https://e.example/${'u'.repeat(2048 - 'https://e.example/'.length)}`,
        model: 'm'.repeat(255),
        tokenFile: `/${'t'.repeat(2047)}`,
      },
      allowedOrigins: Array.from({ length: 64 }, (_, i) => `https://${String(i).padStart(496, 'o')}.example`),
      capability: 'ledger',
    };
    const text = `${JSON.stringify(worst)}\n`;
    assert.ok(bytes(text) <= CONFIG_DATA_LIMIT, `${bytes(text)} bytes`);
    const r = parseConfigText(text);
    assert.ok(r.ok, r.ok ? '' : r.problem);
    assert.equal(r.config.agents.length, MAX_AGENTS);
  });

  it('one agent over the bound is refused, not truncated', () => {
    const r = parseConfigText(JSON.stringify({ version: 1, agents: agents(MAX_AGENTS + 1), embeddings }));
    assert.equal(r.ok, false);
    assert.equal(
      r.ok ? '' : r.problem,
      `agents: more than ${MAX_AGENTS} RetrievalAgents; the servers' configuration holds ${MAX_AGENTS} [agent-limit]`,
    );
  });
});
