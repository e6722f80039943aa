import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { validateChunkMetadata } from './index.ts';

const ok = {
  source: { id: 'reference-docs/a.md', title: 'A', locator: 'git:x#a.md', revision: 'r1' },
  classification: 'public',
  allowed_principals: [{ kind: 'matrix', principal: '@alice:org-a.example' }],
  allowed_groups: ['partner/org-b/docs'],
};

describe('chunk ACL metadata (origin knowledge store v1)', () => {
  test('accepts the origin shape', () => assert.ok(validateChunkMetadata(ok).ok));
  test('rejects rows readable by nobody', () => {
    assert.equal(validateChunkMetadata({ ...ok, allowed_principals: [], allowed_groups: [] }).ok, false);
  });
  test('rejects unknown fields, bad classes, duplicates, local groups, untrimmed text', () => {
    assert.equal(validateChunkMetadata({ ...ok, owner: 'x' }).ok, false);
    assert.equal(validateChunkMetadata({ ...ok, classification: 'internal' }).ok, false);
    assert.equal(
      validateChunkMetadata({
        ...ok,
        allowed_principals: [ok.allowed_principals[0], ok.allowed_principals[0]],
      }).ok,
      false,
    );
    assert.equal(validateChunkMetadata({ ...ok, allowed_groups: ['staff'] }).ok, false);
    assert.equal(validateChunkMetadata({ ...ok, source: { id: ' a' } }).ok, false);
    assert.equal(validateChunkMetadata({ ...ok, source: { id: 'a', extra: 'b' } }).ok, false);
    assert.equal(
      validateChunkMetadata({ ...ok, allowed_principals: [{ kind: 'bridged_matrix', principal: '@a:b.c' }] }).ok,
      false,
    );
  });
});
