/**
 * The schema itself on an empty (project-first) database: migrations are recorded in their own table,
 * immutable and owned by knowledge_owner; the SQL metadata CHECK agrees with the contract's
 * validateChunkMetadata; the embedding profile guard; an embedded data directory keeps its corpus
 * across restarts. The origin-first path is in origin.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { isBoundedCleanText, validateChunkMetadata } from '../../contract/index.ts';
import { AGENT, matrixHeader, meta, NOW, P, startTestDatabase, type TestDatabase } from '../../testkit/retrieval.ts';
import { migrateCommand } from '../cli.ts';
import { ensureProfile } from '../embeddings/profile.ts';
import { startRetrievalServer } from '../index.ts';
import { loadMigrations, MIGRATIONS_TABLE, MigrationDriftError, migrate } from './migrate.ts';

let t: TestDatabase;
before(async () => {
  t = await startTestDatabase();
});
after(async () => {
  await t?.close();
});

describe('migrations', () => {
  test('versions are recorded once, in our own table, and re-running applies nothing', async () => {
    const rows = (await t.pool.query(`SELECT version, sha256 FROM ${MIGRATIONS_TABLE} ORDER BY 1`)).rows;
    assert.deepEqual(
      rows,
      loadMigrations().map((m) => ({ version: m.version, sha256: m.sha256 })),
    );
    assert.deepEqual(await migrate(t.pool, { capability: 'ledger' }), {
      applied: [],
      synced: 0,
      vectorIndexBuilt: false,
      subgraphs: { kept: 0, built: 0, dropped: 0, bytes: 0 },
    });
    // Project-first claims no origin version: the origin's table does not exist.
    const origin = await t.pool.query("SELECT to_regclass('knowledge.schema_migrations') AS t");
    assert.equal(origin.rows[0]?.t, null);
  });
  test('a migration changed after it was applied is refused', async () => {
    const changed = loadMigrations().map((m) => (m.version === 1 ? { ...m, sha256: 'f'.repeat(64) } : m));
    await assert.rejects(migrate(t.pool, { migrations: changed }), MigrationDriftError);
  });
  test('everything the migrations create belongs to knowledge_owner', async () => {
    const r = await t.pool.query(
      `SELECT count(*)::int AS n FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname IN ('knowledge', 'fgentic', 'fgentic_ledger') AND pg_catalog.pg_get_userbyid(c.relowner) <> 'knowledge_owner'`,
    );
    assert.equal(r.rows[0]?.n, 0);
    const f = await t.pool.query(
      `SELECT count(*)::int AS n FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
       WHERE n.nspname IN ('knowledge', 'fgentic', 'fgentic_ledger') AND pg_catalog.pg_get_userbyid(p.proowner) <> 'knowledge_owner'`,
    );
    assert.equal(f.rows[0]?.n, 0);
  });
});

describe('metadata CHECK = contract validateChunkMetadata', () => {
  const principal = fc.constantFrom<unknown>(
    P.alice,
    P.slackBob,
    P.ircBob,
    { kind: 'matrix', principal: 'alice' },
    { kind: 'matrix', principal: '@Alice:org-a.example' },
    { kind: 'matrix', principal: '@alice:org-a.example', network: 'slack' },
    { kind: 'bridged_matrix', principal: '@alice:org-a.example' },
    { kind: 'bridged_matrix', network: 'Slack', principal: '@alice:org-a.example' },
    { kind: 'matrix', principal: '@alice:org-a.example', extra: 1 },
    { kind: 'oidc_client', principal: '@alice:org-a.example' },
    { kind: 'matrix', principal: `@${'a'.repeat(250)}:org-a.example` },
    { kind: 'matrix', principal: '@alice:[::1]:8448' },
    { kind: 'matrix', principal: '@alice:256.1.1.1' },
    { kind: 'matrix', principal: '@alice:-bad.example' },
    'alice',
  );
  const group = fc.constantFrom<unknown>(
    'partner/org-b/docs',
    'partner/org-c/eng',
    'partner/org-b',
    'local/x',
    'partner/Org/x',
    'partner/org-b/docs/extra',
    5,
  );
  type M = Record<string, unknown> & {
    source: Record<string, unknown>;
    allowed_principals: unknown[];
    allowed_groups: unknown[];
  };
  const mutation = fc.oneof(
    fc
      .constantFrom<unknown>(
        ' docs',
        'docs ',
        '',
        'a\u0001b',
        'x'.repeat(513),
        7,
        'docs/b.md',
        // E'\v' is the letter v before PostgreSQL 18.
        'v/docs.md',
        'docs/dev',
        '\u000bdocs',
        'docs\u000b',
      )
      .map((v) => (m: M) => {
        if (m.source) m.source['id'] = v;
      }),
    fc.constantFrom<unknown>('', 'x'.repeat(600), 'Title', 'Dev', 3).map((v) => (m: M) => {
      if (m.source) m.source['title'] = v;
    }),
    fc.constant((m: M) => {
      if (m.source) m.source['extra'] = 'x';
    }),
    fc.constant((m: M) => {
      if (m.source) delete m.source['id'];
    }),
    fc
      .constantFrom<unknown>('public', 'approved_non_public', 'restricted', 'secret', 'authentication', 'internal', 1)
      .map((v) => (m: M) => {
        m['classification'] = v;
      }),
    principal.map((v) => (m: M) => {
      if (Array.isArray(m.allowed_principals)) m.allowed_principals.push(v);
    }),
    group.map((v) => (m: M) => {
      if (Array.isArray(m.allowed_groups)) m.allowed_groups.push(v);
    }),
    fc.constant((m: M) => {
      m.allowed_principals = [];
    }),
    fc.constant((m: M) => {
      m.allowed_groups = [];
    }),
    fc.constant((m: M) => {
      m['extra'] = 1;
    }),
    fc.constantFrom('source', 'classification', 'allowed_principals', 'allowed_groups').map((k) => (m: M) => {
      delete m[k];
    }),
  );
  const metadata = fc.array(mutation, { maxLength: 3 }).map((ms) => {
    const m: M = {
      source: { id: 'docs/a.md', title: 'A' },
      classification: 'public',
      allowed_principals: [P.alice],
      allowed_groups: ['partner/org-b/docs'],
    };
    for (const f of ms) f(m);
    return m;
  });
  test('random near-valid metadata: the database and the contract agree', async () => {
    let valid = 0;
    await fc.assert(
      fc.asyncProperty(metadata, async (m) => {
        const ts = validateChunkMetadata(m).ok;
        // The function of the table's CHECK.
        const r = await t.pool.query('SELECT coalesce(fgentic.metadata_valid($1::jsonb), false) AS ok', [
          JSON.stringify(m),
        ]);
        assert.equal(r.rows[0]?.ok, ts, JSON.stringify(m).slice(0, 300));
        if (ts) valid++;
      }),
      { numRuns: 600, seed: 17 },
    );
    assert.ok(valid > 5);
  });
});

describe('chunk id CHECK = contract isBoundedCleanText', () => {
  test('ids with edge characters, v at either end included: the database and the contract agree', async () => {
    const edge = fc.constantFrom('v', 'V', ' ', '\t', '\u000b', '\f', '\r', '\n', '\u0001', '\u007f', 'a', '/', 'é');
    const id = fc.array(edge, { minLength: 0, maxLength: 4 }).map((cs) => cs.join(''));
    await fc.assert(
      fc.asyncProperty(id, async (v) => {
        const r = await t.pool.query('SELECT coalesce(fgentic.is_bounded_clean_text($1, 512), false) AS ok', [v]);
        assert.equal(r.rows[0]?.ok, isBoundedCleanText(v, 512), JSON.stringify(v));
      }),
      { numRuns: 300, seed: 23 },
    );
    // The named cases: a leading or trailing v is text, not whitespace.
    for (const v of ['v1', '1v', 'dev', 'v']) {
      const r = await t.pool.query('SELECT fgentic.is_bounded_clean_text($1, 512) AS ok', [v]);
      assert.equal(r.rows[0]?.ok, true, v);
    }
  });
});

describe('embedding profile', () => {
  test('first server claims an empty store; a different profile is refused', async () => {
    await t.pool.query('DELETE FROM fgentic.embedding_profile');
    assert.deepEqual(await ensureProfile(t.pool, 'local-hash-1024-v1', true), {
      ok: true,
      profile: 'local-hash-1024-v1',
    });
    const other = await ensureProfile(t.pool, 'bge-m3-1024-v1', true);
    assert.equal(other.ok, false);
  });
  test('an unrecorded store that already holds chunks is only adopted by the origin profile', async () => {
    await t.pool.query('DELETE FROM fgentic.embedding_profile');
    await t.pool.query(
      "INSERT INTO knowledge.chunks VALUES ('x', 'x', (ARRAY[1::real] || array_fill(0::real, ARRAY[1023]))::vector, $1)",
      [JSON.stringify(meta({ principals: [P.alice] }))],
    );
    assert.equal((await ensureProfile(t.pool, 'local-hash-1024-v1', true)).ok, false);
    assert.equal((await ensureProfile(t.pool, 'bge-m3-1024-v1', true)).ok, true);
    await t.pool.query('DELETE FROM knowledge.chunks; DELETE FROM fgentic.chunks');
    await t.pool.query('DELETE FROM fgentic.embedding_profile');
  });
});

describe('migrate command', () => {
  test('migrates an embedded data directory as the owner; a second run applies nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fgentic-migrate-'));
    const out: string[] = [];
    const write = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((chunk: string) => {
      out.push(String(chunk));
      return true;
    }) as typeof process.stdout.write;
    try {
      const saved = process.env['DATABASE_URL'];
      delete process.env['DATABASE_URL'];
      try {
        assert.equal(await migrateCommand(['--data-dir', dir]), 0);
        assert.equal(await migrateCommand(['--data-dir', dir]), 0);
      } finally {
        if (saved !== undefined) process.env['DATABASE_URL'] = saved;
      }
    } finally {
      process.stdout.write = write;
      rmSync(dir, { recursive: true, force: true });
    }
    const results = out.filter((l) => l.startsWith('{"applied"')).map((l) => JSON.parse(l));
    assert.deepEqual(results[0], {
      applied: loadMigrations().map((m) => m.version),
      synced: 0,
      vectorIndexBuilt: true,
      subgraphs: { kept: 0, built: 0, dropped: 0, bytes: 0 },
    });
    assert.deepEqual(results[1], {
      applied: [],
      synced: 0,
      vectorIndexBuilt: false,
      subgraphs: { kept: 0, built: 0, dropped: 0, bytes: 0 },
    });
  });
});

describe('embedded persistence', () => {
  test('a data directory keeps its corpus across restarts', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fgentic-pglite-'));
    try {
      const a = await startRetrievalServer({ agents: [AGENT], dataDir: dir, port: 0, now: () => NOW });
      await a.seed([{ content: 'persisted alpha', metadata: meta({ principals: [P.alice] }) }]);
      await a.close();
      const b = await startRetrievalServer({ agents: [AGENT], dataDir: dir, port: 0, now: () => NOW });
      try {
        const r = await fetch(b.mcpUrl, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'mcp-protocol-version': '2025-11-25',
            'x-fgentic-identity': matrixHeader({ caller: P.alice, audience: [P.alice] }),
            'x-fgentic-agent': 'kagent/knowledge-agent',
          },
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: 1,
            method: 'tools/call',
            params: { name: 'search_knowledge', arguments: { query: 'alpha' } },
          }),
        });
        const msg = (await r.json()) as { result: { structuredContent: { results: { content: string }[] } } };
        assert.deepEqual(
          msg.result.structuredContent.results.map((x) => x.content),
          ['persisted alpha'],
        );
      } finally {
        await b.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
