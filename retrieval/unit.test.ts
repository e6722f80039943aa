/** Pure parts of the retrieval server: predicate, revision gate, Origin check, config, tool args, fusion. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import type { Projection } from '../contract/index.ts';
import { decodeFixture, matrixHeader, oauthHeader, P } from '../testkit/retrieval.ts';
import { serveRetrieval } from './cli.ts';
import { readConfig } from './config.ts';
import { parseArgs } from './mcp/tool.ts';
import { gateRequest, originAllowed } from './mcp/version-gate.ts';
import { choosePlan, DEFAULT_PLANNER, searchStatement } from './planner.ts';
import { buildPredicate, PredicateError, searchArguments } from './predicate.ts';
import { fuse, type SearchHit } from './search.ts';
import { ingestCommand } from './store-commands.ts';

describe('predicate (pure)', () => {
  test('Matrix: classification set and typed audience are parameters, never SQL text', () => {
    const p = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice, P.slackBob] }));
    const pred = buildPredicate(p);
    assert.equal(
      pred.sql,
      "(c.metadata->>'classification') = ANY($1::text[]) AND (c.metadata->'allowed_principals') @> $2::jsonb" +
        " AND jsonb_path_query_array(c.metadata->'allowed_principals', '$[*].principal') ?& $3::text[]",
    );
    assert.deepEqual(pred.params[2], ['@slack-bob:org-a.example', '@alice:org-a.example']);
    assert.deepEqual(pred.params[0], ['public']);
    assert.deepEqual(JSON.parse(String(pred.params[1])), [
      { kind: 'bridged_matrix', network: 'slack', principal: '@slack-bob:org-a.example' },
      { kind: 'matrix', principal: '@alice:org-a.example' },
    ]);
    assert.ok(!pred.sql.includes('alice') && !pred.sql.includes('slack'));
  });
  test('OAuth: exact group overlap, parameterized', () => {
    const p = decodeFixture(
      oauthHeader({
        policy: 'org-b',
        groups: ['partner/org-b/docs'],
        classifications: ['approved_non_public', 'public'],
      }),
    );
    const pred = buildPredicate(p, 3);
    assert.equal(
      pred.sql,
      "(c.metadata->>'classification') = ANY($3::text[]) AND (c.metadata->'allowed_groups') ?| $4::text[]",
    );
    assert.deepEqual(pred.params, [['approved_non_public', 'public'], ['partner/org-b/docs']]);
  });
  test('forged (unvalidated) projections are refused, never widened', () => {
    const m = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] }));
    const o = decodeFixture(oauthHeader({ policy: 'org-b', groups: ['partner/org-b/docs'] }));
    const forged: unknown[] = [
      { ...m, audience: [] },
      { ...m, audience: [{ kind: 'matrix', principal: 'alice' }] },
      { ...m, allowed_classifications: ['public', 'restricted'] },
      { ...m, allowed_classifications: [] },
      { ...o, groups: [] },
      { ...o, groups: ['partner/org-c/docs'] },
      { ...o, groups: ["partner/org-b/docs' OR true --"] },
      { ...o, kind: 'other' },
    ];
    for (const f of forged) assert.throws(() => buildPredicate(f as Projection), PredicateError);
  });
  test('property: any valid projection yields SQL free of identity strings and fixed-shape params', () => {
    fc.assert(
      fc.property(fc.subarray(Object.values(P), { minLength: 1 }), (aud) => {
        const p = decodeFixture(matrixHeader({ caller: aud[0] as (typeof aud)[0], audience: aud }));
        const pred = buildPredicate(p);
        assert.equal(pred.params.length, 3);
        for (const a of aud) assert.ok(!pred.sql.includes(a.principal));
      }),
    );
  });
  test('the search call names one versioned function and passes identity only as typed parameters', () => {
    const matrix = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] }));
    const m = searchStatement(searchArguments(matrix), '[1]', 5, null, DEFAULT_PLANNER);
    assert.match(m.text, /^SELECT .* FROM fgentic\.search_matrix_v1\(\$1, \$2::text\[\], \$3::jsonb,/);
    assert.ok(!m.text.includes(P.alice.principal));
    assert.deepEqual(m.values.slice(3), [5, null, 'auto', 1_000, 100, 50_000]);
    const oauth = decodeFixture(oauthHeader({ policy: 'org-b', groups: ['partner/org-b/docs'] }));
    const g = searchStatement(searchArguments(oauth), '[1]', 5, 'q', { ...DEFAULT_PLANNER, force: 'hnsw' });
    assert.match(g.text, /FROM fgentic\.search_groups_v1\(/);
    assert.ok(!g.text.includes('partner/'));
    assert.deepEqual(g.values.slice(2, 7), ['org-b', ['partner/org-b/docs'], 5, 'q', 'hnsw']);
    assert.equal(choosePlan(DEFAULT_PLANNER.exactThreshold, DEFAULT_PLANNER), 'exact');
    assert.equal(choosePlan(DEFAULT_PLANNER.exactThreshold + 1, DEFAULT_PLANNER), 'hnsw');
    // Below 3 % of the table the exact path answers whatever the threshold.
    assert.equal(choosePlan(2_500, DEFAULT_PLANNER, 100_000), 'exact');
    assert.equal(choosePlan(3_001, DEFAULT_PLANNER, 100_000), 'hnsw');
    // A subgraph that bounds the audience takes over from the exact threshold up.
    assert.equal(choosePlan(1_001, DEFAULT_PLANNER, 100_000, true), 'subgraph');
    assert.equal(choosePlan(1_000, DEFAULT_PLANNER, 100_000, true), 'exact');
  });
});

describe('MCP revision gate (pure)', () => {
  const init = (v: unknown) => ({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: v },
  });
  test('initialize must offer exactly 2025-11-25', () => {
    assert.equal(gateRequest(init('2025-11-25'), []).ok, true);
    for (const v of ['2025-06-18', '2024-11-05', '', 5, undefined]) assert.equal(gateRequest(init(v), []).ok, false);
    assert.equal(gateRequest(init('2025-11-25'), ['2025-06-18']).ok, false);
  });
  test('every later message needs exactly one MCP-Protocol-Version: 2025-11-25', () => {
    const list = { jsonrpc: '2.0', id: 1, method: 'tools/list' };
    assert.equal(gateRequest(list, ['2025-11-25']).ok, true);
    for (const h of [[], ['2025-06-18'], ['2025-11-25 '], ['2025-11-25', '2025-11-25']]) {
      const v = gateRequest(list, h);
      assert.equal(v.ok, false);
      if (!v.ok) assert.equal(v.status, 400);
    }
    const note = { jsonrpc: '2.0', method: 'notifications/initialized' };
    assert.equal(gateRequest(note, []).ok, false);
  });
  test('batches and non-requests are rejected', () => {
    assert.equal(gateRequest([init('2025-11-25')], []).ok, false);
    assert.equal(gateRequest({ jsonrpc: '2.0', id: 1, result: {} }, ['2025-11-25']).ok, false);
    assert.equal(gateRequest('x', ['2025-11-25']).ok, false);
  });
  test('Origin: absent, configured or loopback only', () => {
    assert.equal(originAllowed(undefined, []), true);
    assert.equal(originAllowed('http://127.0.0.1:5173', []), true);
    assert.equal(originAllowed('https://app.example', ['https://app.example']), true);
    assert.equal(originAllowed('https://evil.example', ['https://app.example']), false);
    assert.equal(originAllowed('http://localhost.evil.example', []), false);
    assert.equal(originAllowed('null', []), false);
  });
});

describe('config (strict)', () => {
  const good = {
    version: 1,
    agents: [{ namespace: 'kagent', name: 'knowledge-agent' }],
    embeddings: {
      profile: 'bge-m3-1024-v1',
      url: 'http://agentgateway-proxy.agentgateway-system.svc.cluster.local:8082/v1/embeddings',
      model: 'BAAI/bge-m3',
      tokenFile: '/credentials/authorization',
    },
    allowedOrigins: [],
  };
  const parseConfig = (v: unknown) => {
    const r = readConfig(v);
    assert.ok(r.ok, r.ok ? '' : JSON.stringify(r.problems));
    return r.value;
  };
  test('the documented example parses', () => {
    const c = parseConfig(good);
    assert.equal(c.agents[0]?.name, 'knowledge-agent');
    assert.equal(c.embeddings.model, 'BAAI/bge-m3');
    assert.equal(parseConfig({ ...good, embeddings: { profile: 'local-hash-1024-v1' } }).embeddings.url, undefined);
  });
  test('unknown keys, empty agents, bad labels, bad origins, database URLs → refuse', () => {
    const bad: unknown[] = [
      { ...good, extra: 1 },
      { ...good, version: 2 },
      { ...good, agents: [] },
      { ...good, agents: [{ namespace: 'Kagent', name: 'x' }] },
      { ...good, embeddings: { ...good.embeddings, url: 'ftp://x' } },
      { ...good, embeddings: { ...good.embeddings, dims: 768 } },
      { ...good, allowedOrigins: ['https://app.example/path'] },
      { ...good, databaseUrl: 'postgres://x' },
      [],
    ];
    for (const b of bad) assert.equal(readConfig(b).ok, false, JSON.stringify(b));
  });
});

describe('CLI refuses to start on bad configuration', () => {
  test('missing file, invalid JSON, unknown keys → exit 2', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fgentic-cfg-'));
    const err = process.stderr.write;
    process.stderr.write = () => true;
    try {
      assert.equal(await serveRetrieval(['--config', join(dir, 'absent.json')]), 2);
      writeFileSync(join(dir, 'bad.json'), '{"version":1,');
      assert.equal(await serveRetrieval(['--config', join(dir, 'bad.json')]), 2);
      writeFileSync(
        join(dir, 'extra.json'),
        JSON.stringify({ version: 1, agents: [], embeddings: { profile: 'local-hash-1024-v1' } }),
      );
      assert.equal(await serveRetrieval(['--config', join(dir, 'extra.json')]), 2);
      assert.equal(await ingestCommand(['--jsonl', 'a', '--bundle', 'b']), 2);
    } finally {
      process.stderr.write = err;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('tool arguments', () => {
  test('bounds follow the input schema; every refusal names the argument and the rule', () => {
    assert.deepEqual(parseArgs({ query: 'x' }), {
      ok: true,
      value: { query: 'x', maxResults: 5, mode: 'vector' },
    });
    assert.deepEqual(parseArgs({ query: 'x', max_results: 20, mode: 'hybrid' }), {
      ok: true,
      value: { query: 'x', maxResults: 20, mode: 'hybrid' },
    });
    const cases: [unknown, string, string][] = [
      [{}, 'query', 'is required'],
      [{ query: 7 }, 'query', 'must be a string'],
      [{ query: '' }, 'query', 'must contain a non-whitespace character'],
      [{ query: '   ' }, 'query', 'must contain a non-whitespace character'],
      [{ query: 'x'.repeat(4097) }, 'query', 'must be at most 4096 characters'],
      [{ query: 'a\u0000b' }, 'query', 'must not contain U+0000 (NUL)'],
      [{ query: 'x', max_results: 0 }, 'max_results', 'must be an integer from 1 to 20'],
      [{ query: 'x', max_results: 1.5 }, 'max_results', 'must be an integer from 1 to 20'],
      [{ query: 'x', mode: 'sql' }, 'mode', 'must be "vector" or "hybrid"'],
      [{ query: 'x', extra: true }, 'arguments', 'only query, max_results and mode are accepted'],
      [null, 'arguments', 'must be an object'],
    ];
    for (const [a, argument, rule] of cases) assert.deepEqual(parseArgs(a), { ok: false, argument, rule });
  });
});

describe('hybrid fusion', () => {
  const hit = (id: string, distance: number): SearchHit => ({
    chunk_id: id,
    content: id,
    metadata: { source: { id }, classification: 'public' },
    distance,
  });
  test('reciprocal-rank fusion rewards agreement and never invents rows', () => {
    const fused = fuse([hit('a', 0.1), hit('b', 0.2), hit('c', 0.3)], [hit('c', 0.3), hit('d', 0.4)], 3);
    assert.deepEqual(
      fused.map((h) => h.chunk_id),
      ['c', 'a', 'b'],
    );
  });
});
