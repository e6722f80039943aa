import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { ValidatingWebhookConfiguration } from 'kubernetes-models/admissionregistration.k8s.io/v1';
import {
  admissionReview,
  CONTROLLER,
  plainAgent,
  platform,
  retrievalAgent,
  retrievalAgentCr,
  v1alpha1Agent,
} from '../testkit/webhook.ts';
import { compileCel } from './cel.ts';
import { loadManifests } from './manifests.ts';
import { agentMatchExpression, renderValidatingWebhookConfiguration } from './render.ts';
import { review } from './review.ts';
import type { JsonObject, KubeObject } from './rules/types.ts';
import { StaticClusterView } from './view.ts';

const vwc = renderValidatingWebhookConfiguration();
const webhooks = vwc['webhooks'] as JsonObject[];
const MATCH = compileCel(agentMatchExpression());

/** Evaluates the Agent matchCondition like the API server: true, false, or an error (= call, fail closed). */
function matches(body: Record<string, unknown>): boolean | 'error' {
  const req = body['request'] as JsonObject;
  const out = MATCH({ request: req, object: req['object'] ?? null, oldObject: req['oldObject'] ?? null });
  return typeof out === 'boolean' ? out : 'error';
}

describe('rendered ValidatingWebhookConfiguration', () => {
  test('is a valid admissionregistration.k8s.io/v1 object', () => {
    new ValidatingWebhookConfiguration(vwc as never).validate();
  });

  test('fails closed, has no side effects, answers within 5 s, v1 reviews only, CA from cert-manager', () => {
    assert.equal(
      (vwc['metadata'] as JsonObject)['annotations'] &&
        ((vwc['metadata'] as JsonObject)['annotations'] as JsonObject)['cert-manager.io/inject-ca-from'],
      'fgentic-system/fgentic-webhook-tls',
    );
    assert.equal(webhooks.length, 3);
    for (const w of webhooks) {
      assert.equal(w['failurePolicy'], 'Fail');
      assert.equal(w['sideEffects'], 'None');
      assert.ok((w['timeoutSeconds'] as number) <= 5);
      assert.deepEqual(w['admissionReviewVersions'], ['v1']);
    }
    const agents = webhooks[0]!;
    const rule = (agents['rules'] as JsonObject[])[0]!;
    assert.deepEqual(rule['apiVersions'], ['v1alpha1', 'v1alpha2']);
    assert.deepEqual(rule['operations'], ['CREATE', 'UPDATE', 'DELETE']);
    assert.deepEqual(((webhooks[2]!['rules'] as JsonObject[])[0] as JsonObject)['resources'], [
      'retrievalagents',
      'retrievalrooms',
      'partnerclients',
      'retrievalplatforms',
    ]);
    assert.equal(webhooks[1]!['matchConditions'], undefined, 'RemoteMCPServers are never skipped');
    assert.throws(() => renderValidatingWebhookConfiguration({ timeoutSeconds: 10 }));
  });
});

describe('the Agent matchCondition (evaluated with @bufbuild/cel)', () => {
  test('ordinary Agents skip the webhook', () => {
    assert.equal(matches(admissionReview(plainAgent())), false);
    assert.equal(matches(admissionReview(plainAgent(), { operation: 'UPDATE', oldObject: plainAgent() })), false);
    assert.equal(matches(admissionReview(null, { operation: 'DELETE', oldObject: plainAgent() })), false);
    const noTools = plainAgent();
    delete ((noTools['spec'] as JsonObject)['declarative'] as JsonObject)['tools'];
    assert.equal(matches(admissionReview(noTools)), false);
  });

  test('retrieval Agents, v1alpha1 and every risky feature go to the webhook', () => {
    assert.equal(matches(admissionReview(retrievalAgent(), { user: CONTROLLER })), true);
    assert.equal(matches(admissionReview(null, { operation: 'DELETE', oldObject: retrievalAgent() })), true);
    const stripped = retrievalAgent();
    delete (stripped['metadata'] as JsonObject)['labels'];
    assert.equal(matches(admissionReview(stripped, { operation: 'UPDATE', oldObject: retrievalAgent() })), true);
    assert.equal(matches(admissionReview(v1alpha1Agent())), true);
    const mcpPatches: JsonObject[] = [
      { allowedHeaders: ['x'] },
      { requireApproval: ['get'] },
      { name: 'knowledge-retrieval' },
      { somethingNew: true },
    ];
    for (const patch of mcpPatches) {
      const a = plainAgent();
      Object.assign(
        ((((a['spec'] as JsonObject)['declarative'] as JsonObject)['tools'] as JsonObject[])[0] as JsonObject)[
          'mcpServer'
        ] as JsonObject,
        patch,
      );
      assert.equal(matches(admissionReview(a)), true, JSON.stringify(patch));
    }
    const wrongLevel = plainAgent();
    ((((wrongLevel['spec'] as JsonObject)['declarative'] as JsonObject)['tools'] as JsonObject[])[0] as JsonObject)[
      'allowedHeaders'
    ] = ['x'];
    assert.equal(matches(admissionReview(wrongLevel)), true);
  });

  const examples = resolve(import.meta.dirname, 'testdata/kagent-examples');
  test('every kagent example the webhook denies is sent to it', () => {
    const view = new StaticClusterView([platform()]);
    for (const m of loadManifests([examples])) {
      const obj = m.object;
      if (obj?.['kind'] !== 'Agent') continue;
      const body = admissionReview(obj);
      const r = review(body, view).review.response;
      // Denials that are only the reproduced CRD layer are the API server's own job, before any webhook.
      const beyondCrd = (r.status?.message ?? '').replace(/\[kagent-schema\]/g, '').match(/\[[a-z-]+\]/);
      if (!r.allowed && beyondCrd) assert.notEqual(matches(body), false, m.source);
    }
  });

  test('property: whenever the rules deny an Agent (no RetrievalAgent squatting), the condition does not skip it', () => {
    const view = new StaticClusterView([platform(), retrievalAgentCr()]);
    const header = fc.constantFrom('Authorization', 'X-Fgentic-Identity', 'x-user-id', '*', '', 'x-tenant');
    const mcpExtra = fc.record(
      {
        allowedHeaders: fc.array(header, { maxLength: 3 }),
        requireApproval: fc.constant(['get']),
        name: fc.constantFrom('tools', 'knowledge-retrieval'),
        kind: fc.constantFrom('RemoteMCPServer', '', 'Service', 'MCPServer'),
        namespace: fc.constantFrom('kagent', 'team-a', ''),
        extra: fc.jsonValue(),
      },
      { requiredKeys: [] },
    );
    const toolExtra = fc.record(
      {
        allowedHeaders: fc.array(header, { maxLength: 2 }),
        agentTool: fc.constantFrom('knowledge-agent', 'other-agent'),
        headersFrom: fc.array(
          fc.record({
            name: fc.constantFrom('X-Api-Key', 'x-fgentic-identity', ' X-Fgentic-Identity'),
            value: fc.constant('v'),
          }),
          {
            maxLength: 2,
          },
        ),
      },
      { requiredKeys: [] },
    );
    const labels = fc.option(
      fc.constantFrom<JsonObject>(
        { 'retrieval.fgentic.dev/role': 'retrieval-agent' },
        { 'app.kubernetes.io/managed-by': 'fgentic-retrieval' },
        { other: 'x' },
      ),
      { nil: undefined },
    );
    fc.assert(
      fc.property(
        mcpExtra,
        toolExtra,
        labels,
        fc.constantFrom('Declarative', 'BYO'),
        fc.constantFrom('CREATE', 'UPDATE', 'DELETE'),
        fc.constantFrom('alice', CONTROLLER),
        (mcpPatch, toolPatch, lab, type, operation, user) => {
          const a = plainAgent();
          const spec = a['spec'] as JsonObject;
          const tool = ((spec['declarative'] as JsonObject)['tools'] as JsonObject[])[0] as JsonObject;
          Object.assign(tool['mcpServer'] as JsonObject, mcpPatch);
          const { agentTool, ...rest } = toolPatch;
          Object.assign(tool, rest);
          if (agentTool)
            ((spec['declarative'] as JsonObject)['tools'] as JsonObject[]).push({
              type: 'Agent',
              agent: { name: agentTool, namespace: 'kagent' },
            });
          if (lab) (a['metadata'] as JsonObject)['labels'] = lab;
          if (type === 'BYO') {
            spec['type'] = 'BYO';
            spec['byo'] = { deployment: { image: 'x' } };
          }
          const old: KubeObject = plainAgent();
          const body =
            operation === 'CREATE'
              ? admissionReview(a, { user })
              : operation === 'UPDATE'
                ? admissionReview(a, { operation, oldObject: old, user })
                : admissionReview(null, { operation, oldObject: a, user });
          const denied = !review(body, view).review.response.allowed;
          if (denied) assert.notEqual(matches(body), false, JSON.stringify(body));
        },
      ),
      { numRuns: 1500 },
    );
  });
});
