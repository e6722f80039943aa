import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { waitFor } from '../testkit/common/index.ts';
import { configJson, type MutableJson } from '../testkit/projector/fixtures.ts';
import { parseConfig, validateConfig } from './config.ts';
import { fileConfigStore } from './config-store.ts';

function withChange(mutate: (c: MutableJson) => void) {
  const c = JSON.parse(JSON.stringify(configJson()));
  mutate(c);
  return validateConfig(c);
}

function rejects(mutate: (c: MutableJson) => void, match: RegExp) {
  const r = withChange(mutate);
  assert.equal(r.ok, false);
  if (!r.ok) assert.match(r.error, match);
}

describe('projector configuration', () => {
  test('the interfaces.md example loads', () => {
    const r = withChange(() => {});
    assert.ok(r.ok);
    if (r.ok) {
      assert.equal(r.config.rooms.size, 2);
      assert.equal(r.config.publicRetrievalTimeoutSeconds, 30);
    }
  });

  test('unknown fields fail at every level', () => {
    // Named by where the member is, not by its name (the file's content).
    rejects((c) => (c.extra = 1), /^has an unknown member \[schema\]$/);
    rejects((c) => (c.bridge.extra = 1), /^bridge: has an unknown member \[schema\]$/);
    rejects((c) => (c.rooms[0].note = 'x'), /^rooms\[0\]: has an unknown member/);
    rejects((c) => (c.partners[0].sub = 'x'), /^partners\[0\]: has an unknown member/);
  });

  test('invalid timeout setting: 0, 61, missing, non-integer all fail to load', () => {
    rejects((c) => (c.publicRetrievalTimeoutSeconds = 0), /publicRetrievalTimeoutSeconds/);
    rejects((c) => (c.publicRetrievalTimeoutSeconds = 61), /publicRetrievalTimeoutSeconds/);
    rejects((c) => delete c.publicRetrievalTimeoutSeconds, /publicRetrievalTimeoutSeconds/);
    rejects((c) => (c.publicRetrievalTimeoutSeconds = 1.5), /publicRetrievalTimeoutSeconds/);
    rejects((c) => (c.publicRetrievalTimeoutSeconds = '30'), /publicRetrievalTimeoutSeconds/);
    assert.ok(withChange((c) => (c.publicRetrievalTimeoutSeconds = 1)).ok);
    assert.ok(withChange((c) => (c.publicRetrievalTimeoutSeconds = 60)).ok);
  });

  test('duplicate rooms are a load error', () => {
    rejects(
      (c) => c.rooms.push({ roomId: c.rooms[0].roomId, allowedClassifications: ['public'] }),
      /^rooms\[2\]\.roomId: room ID also declared by rooms\[0\]; the key must be unique \[room-duplicate\]$/,
    );
  });

  test('overlapping partner mapping (same issuer, audience, azp) is a load error', () => {
    rejects((c) => {
      const p = JSON.parse(JSON.stringify(c.partners[0]));
      p.policyId = 'org-c';
      p.groups = ['partner/org-c/docs'];
      c.partners.push(p);
    }, /also mapped by partners\[0\].*\[partner-duplicate\]/);
  });

  test('partner/local group collision is a load error', () => {
    rejects((c) => c.localGroups.push('partner/org-b/docs'), /must not start with partner\/ \[group-collision\]/);
  });

  test('partner groups outside their policy id are a load error', () => {
    rejects((c) => (c.partners[0].groups = ['partner/org-c/docs']), /groups/);
    rejects((c) => (c.partners[0].groups = []), /groups/);
    rejects((c) => (c.partners[0].groups = ['docs']), /groups/);
  });

  test('unsafe or unanchored regexes are load errors', () => {
    rejects((c) => (c.bridge.serviceUserRegex = '@agent-.*'), /anchored/);
    rejects((c) => (c.bridge.serviceUserRegex = '^(a+)+$'), /nested quantifiers/);
    rejects((c) => (c.bridge.serviceUserRegex = '^(a)\\1$'), /backreferences/);
    rejects((c) => (c.bridge.serviceUserRegex = '^([a-$'), /compile/);
    rejects((c) => (c.bridge.serviceUserRegex = `^${'a'.repeat(1030)}$`), /regex must be 2-1024 characters/);
    // Identity escapes operators commonly write are accepted.
    assert.ok(withChange((c) => (c.bridge.serviceUserRegex = '^@agent\\-[a-z]+:org\\-a\\.example$')).ok);
  });

  test('classifications, room IDs, paths and duplicates are validated', () => {
    rejects(
      (c) => (c.rooms[0].allowedClassifications = ['public', 'approved_non_public']),
      /allowedClassifications|must be/,
    );
    rejects((c) => (c.rooms[0].roomId = 'room'), /room ID/);
    rejects((c) => (c.agents[0].localPath = '/metrics'), /reserved/);
    rejects((c) => (c.agents[1].localPath = c.agents[0].localPath), /duplicate route path/);
    rejects((c) => c.agents.push({ ...c.agents[1] }), /also claimed by agents\[1\].*\[agent-duplicate\]/);
    rejects((c) => (c.partners[0].issuer = 'http://issuer.example'), /https/);
  });

  test('non-strict JSON (duplicate names) fails', () => {
    const r = parseConfig('{"version":1,"version":1}');
    assert.equal(r.ok, false);
  });

  test('file store: missing → not ready; valid → ready; invalid → deny-all, never the previous file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'projector-config-'));
    const file = join(dir, 'projector.json');
    const store = fileConfigStore(file, { pollMs: 20 });
    try {
      assert.equal(store.current().ready, false);
      const write = (text: string) => {
        writeFileSync(join(dir, 'tmp'), text);
        renameSync(join(dir, 'tmp'), file);
      };
      write(JSON.stringify(configJson()));
      await waitFor('ready', () => store.current().ready);
      write('{"version":1}');
      await waitFor('not ready', () => !store.current().ready);
      const s = store.current();
      assert.equal(s.ready, false);
      write(JSON.stringify(configJson()));
      await waitFor('ready', () => store.current().ready);
      rmSync(file);
      await waitFor('not ready', () => !store.current().ready);
    } finally {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
