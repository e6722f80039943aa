/** The soak's oracle must be able to fail: forbidden rows and stale registry states are flagged. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ALICE, BOB } from '../../local/helpers.ts';
import { matrixMayRead, partnerMayRead, REVOCATION_BOUND_MS, type Registry, RegistryHistory } from './oracle.ts';

const before: Registry = {
  rooms: new Map([['!eng', ['approved_non_public', 'public'] as const]]) as Registry['rooms'],
  partners: new Map([
    ['org-d-a2a', { groups: ['partner/org-d/engineering'], classes: ['approved_non_public', 'public'] }],
  ]) as Registry['partners'],
};
const after: Registry = {
  rooms: new Map([['!eng', ['public'] as const]]) as Registry['rooms'],
  partners: new Map() as Registry['partners'],
};

describe('soak oracle', () => {
  test('Matrix rows need every audience member and an allowed classification', () => {
    assert.equal(matrixMayRead('demo/engineering/roadmap', [ALICE], ['approved_non_public', 'public']), true);
    assert.equal(matrixMayRead('demo/engineering/roadmap', [ALICE], ['public']), false);
    assert.equal(matrixMayRead('demo/engineering/roadmap', [ALICE, BOB], ['approved_non_public', 'public']), false);
    assert.equal(matrixMayRead('demo/hr/salaries', [ALICE], ['approved_non_public', 'public']), false);
    assert.equal(matrixMayRead('demo/unknown', [ALICE], ['public']), false);
  });
  test('partner rows need a shared group and an allowed classification', () => {
    assert.equal(
      partnerMayRead('demo/partners/org-d-architecture', ['partner/org-d/engineering'], ['approved_non_public']),
      true,
    );
    assert.equal(
      partnerMayRead('demo/partners/org-d-architecture', ['partner/org-b/docs'], ['approved_non_public']),
      false,
    );
  });
  test('after a change plus the bound, only the new registry is admissible', () => {
    const h = new RegistryHistory(before, 0);
    h.change(after, 10_000);
    assert.deepEqual(h.admissible(9_000, 9_500), [before]);
    assert.deepEqual(h.admissible(10_000 + REVOCATION_BOUND_MS - 1, 12_500), [before, after]);
    assert.deepEqual(h.admissible(10_000 + REVOCATION_BOUND_MS + 1, 13_000), [after]);
  });
});
