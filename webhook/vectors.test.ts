// Replays the shared AdmissionReview conformance cases (webhook/vectors/admission-cases.json).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { review } from './review.ts';
import type { KubeObject } from './rules/types.ts';
import { StaticClusterView } from './view.ts';

interface Case {
  name: string;
  review: Record<string, unknown>;
  expect: { allowed: boolean; code: number; reasons: string[]; warnings: number };
}

const vectors = JSON.parse(readFileSync(join(import.meta.dirname, 'vectors', 'admission-cases.json'), 'utf8')) as {
  cluster: KubeObject[];
  cases: Case[];
};

describe('shared AdmissionReview conformance cases', () => {
  const view = new StaticClusterView(vectors.cluster);
  for (const c of vectors.cases) {
    test(c.name, () => {
      const r = review(c.review, view).review.response;
      const uid = (c.review['request'] as { uid?: unknown }).uid;
      assert.equal(r.uid, typeof uid === 'string' ? uid : '');
      assert.equal(r.allowed, c.expect.allowed, r.status?.message);
      assert.equal(r.status?.code ?? 200, c.expect.code);
      const reasons = [...(r.status?.message ?? '').matchAll(/\[([a-z][a-z0-9-]*)\]/g)].map((m) => m[1]);
      assert.deepEqual(reasons, c.expect.reasons);
      assert.equal(r.warnings?.length ?? 0, c.expect.warnings);
    });
  }
});
