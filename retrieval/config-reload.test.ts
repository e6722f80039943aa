/**
 * The reload rules of the retrieval server's configuration (retrieval/config-store.ts), for both
 * sources: a valid text replaces the agent set, a rejected one keeps the previous set narrowed to the
 * agents it still lists (never adding one), a missing one serves nothing; and the file source reloads
 * retrieval.json on change, including a ConfigMap-style `..data` symlink swap.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import type { AgentRef } from '../contract/index.ts';
import { waitFor } from '../testkit/common/index.ts';
import { agentKey, parseConfigText } from './config.ts';
import { configTracker, fileRetrievalConfigStore, type RetrievalConfigState } from './config-store.ts';

const A: AgentRef = { namespace: 'kagent', name: 'knowledge-agent' };
const B: AgentRef = { namespace: 'team-a', name: 'late-agent' };
const C: AgentRef = { namespace: 'team-b', name: 'third-agent' };

const text = (agents: readonly AgentRef[], extra: Record<string, unknown> = {}) =>
  `${JSON.stringify({ version: 1, agents, embeddings: { profile: 'local-hash-1024-v1' }, ...extra })}\n`;

const served = (s: RetrievalConfigState): string[] => (s.ready ? s.config.agents.map(agentKey).sort() : []);

describe('reload rules', () => {
  test('a valid text replaces the agent set: added served, removed gone', () => {
    const t = configTracker();
    t.apply(text([A]));
    assert.deepEqual(served(t.state()), [agentKey(A)]);
    t.apply(text([A, B]));
    assert.deepEqual(served(t.state()), [agentKey(A), agentKey(B)]);
    t.apply(text([B]));
    assert.deepEqual(served(t.state()), [agentKey(B)]);
    assert.deepEqual(t.counts(), { applied: 3, rejected: 0, missing: 0 });
  });

  test('an empty agent list is a valid reload that serves nobody', () => {
    const t = configTracker();
    t.apply(text([A]));
    t.apply(text([]));
    const s = t.state();
    assert.ok(s.ready && s.rejected === undefined);
    assert.deepEqual(served(s), []);
  });

  test('a rejected text keeps the previous set, narrowed to the agents it lists, and names the field', () => {
    const problems: string[] = [];
    const t = configTracker({ onReload: (r, p) => r === 'rejected' && problems.push(p ?? '') });
    t.apply(text([A, B]));
    t.apply(text([A], { embeddings: { profile: 'bge_m3' } }));
    const s = t.state();
    assert.ok(s.ready);
    const expected =
      'embeddings.profile: must be 1-64 of [a-z0-9.-], starting and ending with a letter or digit [embeddings-profile]; embeddings.url: required [required]; embeddings.model: required [required]';
    assert.equal(s.rejected, expected);
    assert.deepEqual(served(s), [agentKey(A)]);
    assert.deepEqual(problems, [expected]);
  });

  test('a rejected text that is not JSON keeps the previous set as it was; the problem is an offset', () => {
    const t = configTracker();
    t.apply(text([A, B]));
    t.apply('{"version": 1, "agents": [');
    const s = t.state();
    assert.ok(s.ready && /^not valid JSON at offset \d+$/.test(s.rejected ?? ''));
    assert.deepEqual(served(s), [agentKey(A), agentKey(B)]);
  });

  test('a rejected text never adds an agent back, even one the last valid text had', () => {
    const t = configTracker();
    t.apply(text([A, B]));
    t.apply(text([A], { unknown: 1 }));
    t.apply(text([A, B], { unknown: 2 }));
    assert.deepEqual(served(t.state()), [agentKey(A)]);
    t.apply(text([A, B]));
    assert.deepEqual(served(t.state()), [agentKey(A), agentKey(B)]);
  });

  test('without a previous configuration a rejected text serves nothing', () => {
    const t = configTracker();
    t.apply(text([A], { unknown: 1 }));
    const s = t.state();
    assert.ok(
      !s.ready && /configuration invalid \(has an unknown member \[schema\]\)/.test(s.error),
      s.ready ? '' : s.error,
    );
  });

  test('a missing configuration serves nothing until a valid one; an unchanged text is not counted again', () => {
    const t = configTracker();
    t.apply(text([A]));
    t.apply(undefined);
    assert.ok(!t.state().ready);
    t.apply(undefined);
    t.apply(text([A], { unknown: 1 }));
    assert.ok(!t.state().ready, 'a rejected text does not revive a missing configuration');
    t.apply(text([A]));
    assert.deepEqual(served(t.state()), [agentKey(A)]);
    assert.deepEqual(t.counts(), { applied: 2, rejected: 1, missing: 1 });
  });

  test('problems never quote the text (content-free)', () => {
    const secret = 'sk-very-secret-token-value';
    const t = configTracker();
    t.apply(text([A]));
    for (const bad of [
      text([A], {
        embeddings: {
          profile: 'bge',
          url: `https://${secret}.example/v1`,
          model: secret,
          tokenFile: ` ${secret}`,
        },
      }),
      `{"version":1,"agents":[],"${secret}":1}`,
      `{"version":1,"agents":"${secret}"`,
    ]) {
      t.apply(bad);
      const s = t.state();
      assert.ok(s.ready && s.rejected !== undefined && !s.rejected.includes(secret), s.ready ? s.rejected : s.error);
    }
  });

  test('property: parseConfigText never throws, and a rejected text never widens the agent set', () => {
    const ref = fc.constantFrom(A, B, C, { namespace: 'Bad_NS', name: 'x' });
    const doc = fc.oneof(
      fc
        .tuple(fc.array(ref, { maxLength: 4 }), fc.boolean())
        .map(([agents, broken]) => text(agents, broken ? { extra: true } : {})),
      fc.string(),
      fc.constant(undefined),
    );
    fc.assert(
      fc.property(fc.array(doc, { minLength: 1, maxLength: 12 }), (docs) => {
        const t = configTracker();
        let lastValid: Set<string> | undefined;
        for (const d of docs) {
          const before = new Set(served(t.state()));
          if (d !== undefined) parseConfigText(d, { allowNoAgents: true }); // must not throw
          t.apply(d);
          const s = t.state();
          const now = served(s);
          if (d === undefined) {
            assert.equal(s.ready, false);
            lastValid = undefined;
          } else if (s.ready && s.rejected === undefined) {
            lastValid = new Set(now);
          } else {
            // Rejected: a subset of what served before, and of the last valid set.
            for (const k of now) assert.ok(before.has(k) && (lastValid?.has(k) ?? false), k);
          }
        }
      }),
      { numRuns: 300 },
    );
  });
});

const until = async (probe: () => boolean, limitMs = 15_000): Promise<void> => {
  await waitFor('the reloaded configuration', probe, limitMs);
};

describe('file source', () => {
  test('reloads retrieval.json on change: added, removed, rejected kept, missing denied', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'retrieval-config-'));
    const path = join(dir, 'retrieval.json');
    writeFileSync(path, text([A]));
    const store = fileRetrievalConfigStore(path, { pollMs: 100 });
    try {
      assert.deepEqual(served(store.current()), [agentKey(A)]);
      writeFileSync(path, text([A, B]));
      await until(() => served(store.current()).length === 2);
      writeFileSync(path, text([B]));
      await until(() => served(store.current()).join() === agentKey(B));
      writeFileSync(path, text([B], { embeddings: 'nope' }));
      await until(() => {
        const s = store.current();
        return s.ready && s.rejected !== undefined;
      });
      assert.deepEqual(served(store.current()), [agentKey(B)]);
      assert.deepEqual(store.reloads?.(), { applied: 3, rejected: 1, missing: 0 });
      rmSync(path);
      await until(() => !store.current().ready);
      writeFileSync(path, text([A]));
      await until(() => served(store.current()).join() === agentKey(A));
    } finally {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('follows a mounted ConfigMap swap (the ..data symlink renamed over)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'retrieval-cm-'));
    const version = (n: number, agents: AgentRef[]) => {
      const v = join(dir, `..v${n}`);
      mkdirSync(v);
      writeFileSync(join(v, 'retrieval.json'), text(agents));
      symlinkSync(`..v${n}`, join(dir, `..tmp${n}`));
      renameSync(join(dir, `..tmp${n}`), join(dir, '..data'));
    };
    version(1, [A]);
    symlinkSync('..data/retrieval.json', join(dir, 'retrieval.json'));
    // A long poll: the directory watch alone should see the swap (the poll is the fallback).
    const store = fileRetrievalConfigStore(join(dir, 'retrieval.json'), { pollMs: 60_000 });
    try {
      assert.deepEqual(served(store.current()), [agentKey(A)]);
      version(2, [A, C]);
      await until(() => served(store.current()).length === 2);
    } finally {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
