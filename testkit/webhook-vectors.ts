/**
 * Writes webhook/vectors/admission-cases.json: shared AdmissionReview v1 conformance cases (request in,
 * expected verdict and reason codes out) with the cluster objects each case assumes. Run with
 * `node --import tsx testkit/webhook-vectors.ts [--out-dir DIR]`; `vectors.test.ts` replays them
 * against review(), and `scripts/vectors-fresh.test.ts` checks the committed file is what this writes.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { RETRIEVAL_TOOL } from '../rules/index.ts';
import { review } from '../webhook/review.ts';
import type { JsonObject, KubeObject } from '../webhook/rules/types.ts';
import { StaticClusterView } from '../webhook/view.ts';
import {
  admissionReview,
  CONTROLLER,
  clone,
  partner,
  plainAgent,
  platform,
  retrievalAgent,
  retrievalAgentCr,
  room,
  v1alpha1Agent,
} from './webhook.ts';

const cluster = [
  platform(),
  retrievalAgentCr(),
  plainAgent(),
  room('existing', '!existing:org-a.example'),
  partner('existing'),
];

function mcp(a: KubeObject): JsonObject {
  return ((((a['spec'] as JsonObject)['declarative'] as JsonObject)['tools'] as JsonObject[])[0] as JsonObject)[
    'mcpServer'
  ] as JsonObject;
}
function withMcp(a: KubeObject, patch: JsonObject): KubeObject {
  Object.assign(mcp(a), patch);
  return a;
}

const cases: Array<[string, Record<string, unknown>]> = [
  ['retrieval Agent rendered by the controller', admissionReview(retrievalAgent(), { user: CONTROLLER })],
  ['retrieval Agent created by a user', admissionReview(retrievalAgent())],
  ['retrieval Agent deleted by a user', admissionReview(null, { operation: 'DELETE', oldObject: retrievalAgent() })],
  [
    'retrieval Agent deleted by the garbage collector',
    admissionReview(null, {
      operation: 'DELETE',
      oldObject: retrievalAgent(),
      user: 'system:serviceaccount:kube-system:generic-garbage-collector',
    }),
  ],
  [
    'retrieval Agent with Authorization propagated',
    admissionReview(withMcp(retrievalAgent(), { allowedHeaders: ['Authorization'] }), { user: CONTROLLER }),
  ],
  [
    'retrieval Agent with requireApproval',
    admissionReview(withMcp(retrievalAgent(), { requireApproval: [RETRIEVAL_TOOL] }), {
      user: CONTROLLER,
    }),
  ],
  [
    'retrieval Agent on another namespace server',
    admissionReview(withMcp(retrievalAgent(), { namespace: 'elsewhere' }), { user: CONTROLLER }),
  ],
  [
    'retrieval Agent updated by the controller',
    admissionReview(retrievalAgent(), { operation: 'UPDATE', oldObject: retrievalAgent(), user: CONTROLLER }),
  ],
  ['ordinary Agent', admissionReview(plainAgent())],
  ['ordinary Agent with allowedHeaders', admissionReview(withMcp(plainAgent(), { allowedHeaders: ['x-tenant-id'] }))],
  [
    'ordinary Agent with wildcard, duplicate and non-token headers',
    admissionReview(withMcp(plainAgent(), { allowedHeaders: ['*', 'X Tenant', 'x-a', 'X-A'] })),
  ],
  ['ordinary Agent on knowledge-retrieval', admissionReview(withMcp(plainAgent(), { name: 'knowledge-retrieval' }))],
  ['v1alpha1 Agent', admissionReview(v1alpha1Agent())],
  [
    'v1alpha1 Agent on knowledge-retrieval',
    admissionReview(v1alpha1Agent('old', 'team-a', 'kagent/knowledge-retrieval')),
  ],
  ['room with a new ID', admissionReview(room('new', '!new:org-a.example'))],
  ['room with a taken ID', admissionReview(room('new', '!existing:org-a.example'))],
  [
    'room approved_non_public without agreement',
    admissionReview(room('new', '!n2:org-a.example', { allowedClassifications: ['approved_non_public', 'public'] })),
  ],
  ['partner with a taken mapping key', admissionReview(partner('new'))],
  ['platform with a partner/ local group', admissionReview(platform('kagent', ['partner/org-b/docs']))],
  ['RetrievalAgent over a foreign Agent', admissionReview(retrievalAgentCr('helper', 'team-a'))],
  [
    'malformed: no uid',
    (() => {
      const b = admissionReview(plainAgent());
      delete (b['request'] as JsonObject)['uid'];
      return b;
    })(),
  ],
];

const view = new StaticClusterView(cluster);
const out = {
  description:
    'AdmissionReview v1 conformance cases for the fgentic-retrieval webhook. Each case is reviewed with `cluster` as the other objects; `expect.reasons` are the reason codes in the denial message, in order.',
  cluster,
  cases: cases.map(([name, body], i) => {
    const req = body['request'] as JsonObject;
    if (typeof req['uid'] === 'string') req['uid'] = `vector-${String(i + 1).padStart(3, '0')}`;
    const r = review(clone(body), view).review.response;
    const reasons = [...(r.status?.message ?? '').matchAll(/\[([a-z][a-z0-9-]*)\]/g)].map((m) => m[1]);
    return {
      name,
      review: body,
      expect: { allowed: r.allowed, code: r.status?.code ?? 200, reasons, warnings: r.warnings?.length ?? 0 },
    };
  }),
};
const { values } = parseArgs({ options: { 'out-dir': { type: 'string' } } });
writeFileSync(
  join(values['out-dir'] ?? join(import.meta.dirname, '../webhook/vectors'), 'admission-cases.json'),
  `${JSON.stringify(out, null, 2)}\n`,
);
