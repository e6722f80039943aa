// The hand-written kagent v0.9.11 examples (webhook/testdata/kagent-examples), reviewed as real AdmissionReviews.
// kagent admits valid/* and controller-rejects/*; the platform policy is stricter (ADR 0017 decision 10, docs/decisions.md#adr-10).
import assert from 'node:assert/strict';
import { join, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { admissionReview } from '../testkit/webhook.ts';
import { loadManifests } from './manifests.ts';
import { review } from './review.ts';
import { StaticClusterView } from './view.ts';

const ROOT = resolve(import.meta.dirname, 'testdata/kagent-examples');

interface Expectation {
  allowed: boolean;
  /** Reason codes that must appear in the denial message. */
  reasons?: string[];
  /** Substrings (kagent's own wording) that must appear in the message. */
  text?: string[];
  /** Reason codes that must appear among the warnings. */
  warnings?: string[];
}

const EXPECTED: Record<string, Expectation> = {
  'valid/01-remotemcpserver.yaml': { allowed: true },
  'valid/02-agent-allowedheaders.yaml': {
    allowed: false,
    reasons: ['allowed-headers-forbidden', 'header-not-allowed'],
  },
  'invalid/01-requireapproval-not-in-toolnames.yaml': {
    allowed: false,
    reasons: ['kagent-schema', 'allowed-headers-forbidden'],
    text: ['each RequireApproval entry must also appear in ToolNames'],
  },
  'invalid/02-requireapproval-without-toolnames.yaml': {
    allowed: false,
    reasons: ['kagent-schema'],
    text: ['each RequireApproval entry must also appear in ToolNames'],
  },
  'invalid/03-allowedheaders-wrong-level.yaml': {
    allowed: false,
    reasons: ['allowed-headers-position'],
    text: ['spec.declarative.tools[0].allowedHeaders'],
  },
  'invalid/04-allowedheaders-not-a-list.yaml': {
    allowed: false,
    reasons: ['allowed-headers-forbidden', 'kagent-schema'],
    text: ['must be of type array'],
  },
  'invalid/05-tool-type-wrong-case.yaml': {
    allowed: false,
    reasons: ['kagent-schema'],
    text: ['Unsupported value: "MCPServer"'],
  },
  'invalid/06-tool-type-agent-with-mcpserver.yaml': {
    allowed: false,
    reasons: ['kagent-schema'],
    text: ['type.mcpServer must be nil if the type is not McpServer'],
  },
  'invalid/07-tool-type-omitted.yaml': {
    allowed: false,
    reasons: ['kagent-schema'],
    text: ['no such key: type'],
  },
  'invalid/08-headersfrom-value-and-valuefrom.yaml': {
    allowed: false,
    reasons: ['kagent-schema'],
    text: ['Exactly one of value or valueFrom must be specified'],
  },
  'invalid/09-declarative-missing.yaml': {
    allowed: false,
    reasons: ['kagent-schema'],
    text: ['declarative must be specified if type is Declarative, or byo must be specified if type is BYO'],
  },
  'invalid/10-byo-with-tools.yaml': { allowed: false, reasons: ['kagent-schema'], text: ['spec.byo.tools'] },
  'invalid/11-toolnames-too-many.yaml': {
    allowed: false,
    reasons: ['kagent-schema'],
    text: ['must have at most 50 items'],
  },
  'invalid/12-remotemcpserver-bad.yaml': {
    allowed: false,
    reasons: ['kagent-schema'],
    text: [
      'spec.description: Required value',
      'Unsupported value: "HTTP"',
      'spec.tls must be unset when spec.url has http:// scheme',
    ],
  },
  'controller-rejects/01-no-system-message.yaml': {
    allowed: false,
    reasons: ['allowed-headers-forbidden'],
    warnings: ['kagent-no-system-message'],
  },
  'controller-rejects/02-kind-omitted-defaults-to-mcpserver.yaml': {
    allowed: false,
    reasons: ['allowed-headers-forbidden'],
    warnings: ['kagent-kind-empty'],
  },
  'controller-rejects/03-cross-namespace-not-allowed.yaml': {
    allowed: true,
    warnings: ['kagent-cross-namespace'],
  },
  'controller-rejects/04-byo-with-declarative-tools-ignored.yaml': {
    allowed: false,
    reasons: ['byo-declarative', 'allowed-headers-forbidden'],
  },
  'controller-rejects/05-unknown-server-kind.yaml': {
    allowed: true,
    warnings: ['kagent-unknown-server-type'],
  },
  'controller-rejects/06-header-name-not-a-token.yaml': {
    allowed: false,
    reasons: ['allowed-headers-forbidden', 'header-empty', 'header-not-token', 'header-duplicate'],
  },
};

describe('kagent examples as AdmissionReviews', () => {
  const manifests = loadManifests([ROOT]);
  const view = new StaticClusterView(manifests.flatMap((m) => (m.object ? [m.object] : [])));

  test('every example file has an expectation', () => {
    const files = new Set(manifests.map((m) => m.source.slice(ROOT.length + 1)));
    for (const f of files) if (!f.startsWith('valid/00')) assert.ok(EXPECTED[f], `no expectation for ${f}`);
    for (const f of Object.keys(EXPECTED)) assert.ok(files.has(f), `missing example ${f}`);
  });

  for (const [file, want] of Object.entries(EXPECTED)) {
    for (const version of ['v1alpha2', 'v1alpha1'] as const) {
      if (version === 'v1alpha1' && !file.includes('agent')) continue;
      test(`${file} (${version === 'v1alpha2' ? 'as written' : 'same body sent as v1alpha1'})`, () => {
        const m = manifests.find((x) => x.source === join(ROOT, file));
        assert.ok(m?.object, `${file} parses`);
        const obj = structuredClone(m.object);
        if (version === 'v1alpha1') obj['apiVersion'] = 'kagent.dev/v1alpha1';
        const body = admissionReview(obj);
        const out = review(body, view).review.response;
        assert.equal(out.uid, (body['request'] as { uid: string }).uid);
        if (version === 'v1alpha1') {
          // v1alpha1 has no declarative layout: the only question is whether allowedHeaders appears anywhere.
          const hasHeaders = JSON.stringify(obj['spec']).includes('"allowedHeaders"');
          assert.equal(out.allowed, !hasHeaders, out.status?.message);
          return;
        }
        assert.equal(out.allowed, want.allowed, out.status?.message ?? 'allowed');
        for (const r of want.reasons ?? []) assert.match(out.status?.message ?? '', new RegExp(`\\[${r}\\]`));
        for (const t of want.text ?? [])
          assert.ok(out.status?.message?.includes(t), `message contains ${t}: ${out.status?.message}`);
        for (const w of want.warnings ?? [])
          assert.ok(
            out.warnings?.some((x) => x.includes(`[${w}]`)),
            `warning ${w} in ${JSON.stringify(out.warnings)}`,
          );
      });
    }
  }
});
