// The optional ValidatingAdmissionPolicy form of the Agent rules, evaluated with a real CEL engine
// (@bufbuild/cel) and compared verdict for verdict with the webhook on generated Agents.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  ValidatingAdmissionPolicy,
  ValidatingAdmissionPolicyBinding,
} from 'kubernetes-models/admissionregistration.k8s.io/v1';
import {
  admissionReview,
  CONTROLLER,
  plainAgent,
  platform,
  retrievalAgent,
  retrievalAgentCr,
  v1alpha1Agent,
} from '../testkit/webhook.ts';
import { compileCel, compileCelValue } from './cel.ts';
import { agentPolicyValidations, renderValidatingAdmissionPolicy } from './render.ts';
import { review } from './review.ts';
import { isObject, type JsonObject, type KubeObject } from './rules/types.ts';
import { StaticClusterView } from './view.ts';

const { variables, validations } = agentPolicyValidations();
const compiledVars = variables.map((v) => ({ name: v.name, fn: compileCelValue(v.expression) }));
const compiled = validations.map((v) => ({ message: v.message, fn: compileCel(v.expression) }));

/** Evaluates the policy like the API server: the messages of failed validations ([] = admitted). */
function policyDenials(body: Record<string, unknown>): string[] {
  const req = body['request'] as JsonObject;
  const vars: Record<string, unknown> = {};
  const env = {
    request: req,
    object: req['object'] ?? null,
    oldObject: req['oldObject'] ?? null,
    variables: vars,
  };
  for (const v of compiledVars) vars[v.name] = v.fn(env);
  const failed: string[] = [];
  for (const val of compiled) {
    const out = val.fn(env);
    if (out !== true) failed.push(out === false ? val.message : `${out}: ${val.message}`);
  }
  return failed;
}

function labelled(o: unknown): boolean {
  const l = isObject(o) && isObject(o['metadata']) ? o['metadata']['labels'] : undefined;
  return (
    isObject(l) && ('retrieval.fgentic.dev/role' in l || l['app.kubernetes.io/managed-by'] === 'fgentic-retrieval')
  );
}

/** Webhook verdict with a cluster where every labelled Agent is declared by a RetrievalAgent. */
function webhookVerdict(body: Record<string, unknown>): {
  allowed: boolean;
  apiserverOnly: boolean;
  message: string;
} {
  const req = body['request'] as JsonObject;
  const objs: KubeObject[] = [platform()];
  for (const o of [req['object'], req['oldObject']])
    if (labelled(o)) {
      const m = (o as JsonObject)['metadata'] as JsonObject;
      objs.push(retrievalAgentCr(String(m['name']), String(m['namespace'])));
    }
  const r = review(body, new StaticClusterView(objs)).review.response;
  const reasons = [...(r.status?.message ?? '').matchAll(/\[([a-z][a-z0-9-]*)\]/g)].map((m) => m[1]);
  const apiserverOnly = !r.allowed && reasons.every((x) => x === 'kagent-schema' || x === 'allowed-headers-position');
  return { allowed: r.allowed, apiserverOnly, message: r.status?.message ?? '' };
}

describe('rendered ValidatingAdmissionPolicy', () => {
  test('is a valid admissionregistration.k8s.io/v1 policy and binding', () => {
    const [policy, binding] = renderValidatingAdmissionPolicy();
    new ValidatingAdmissionPolicy(policy as never).validate();
    new ValidatingAdmissionPolicyBinding(binding as never).validate();
    assert.equal((policy!['spec'] as JsonObject)['failurePolicy'], 'Fail');
  });

  test('admits the rendered retrieval Agent for the controller only', () => {
    assert.deepEqual(policyDenials(admissionReview(retrievalAgent(), { user: CONTROLLER })), []);
    assert.match(policyDenials(admissionReview(retrievalAgent())).join(), /only system:serviceaccount/);
    assert.deepEqual(policyDenials(admissionReview(plainAgent())), []);
    assert.deepEqual(policyDenials(admissionReview(v1alpha1Agent())), []);
  });

  test('property: the policy and the webhook agree on generated Agents', () => {
    const header = fc.constantFrom('X-Fgentic-Identity', 'x-fgentic-identity', 'Authorization', 'x-user-id', '*', '');
    const mcpPatch = fc.record(
      {
        allowedHeaders: fc.array(header, { maxLength: 2 }),
        requireApproval: fc.constantFrom(['search_knowledge'], []),
        name: fc.constantFrom('knowledge-retrieval', 'tools'),
        kind: fc.constantFrom('RemoteMCPServer', 'MCPServer', ''),
        apiGroup: fc.constantFrom('kagent.dev', ''),
        namespace: fc.constantFrom('kagent', 'team-a', ''),
        toolNames: fc.constantFrom(['search_knowledge'], ['search_knowledge', 'x'], ['get']),
      },
      { requiredKeys: [] },
    );
    const shape = fc.record(
      {
        runtime: fc.constantFrom('python', 'go', undefined),
        type: fc.constantFrom('Declarative', 'BYO'),
        extraTool: fc.boolean(),
        dropRole: fc.boolean(),
        dropManagedBy: fc.boolean(),
        ownerName: fc.constantFrom('knowledge-agent', 'other'),
        tokenEnv: fc.boolean(),
        staticIdentity: fc.boolean(),
        apiVersion: fc.constantFrom('kagent.dev/v1alpha2', 'kagent.dev/v1alpha2', 'kagent.dev/v1alpha1'),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(
        fc.boolean(),
        mcpPatch,
        shape,
        fc.constantFrom('CREATE', 'UPDATE', 'DELETE'),
        fc.constantFrom('alice', CONTROLLER, 'system:serviceaccount:kube-system:generic-garbage-collector'),
        (fromRetrieval, patch, s, operation, user) => {
          const a = fromRetrieval ? retrievalAgent() : plainAgent('knowledge-agent', 'kagent');
          const md = a['metadata'] as JsonObject;
          const spec = a['spec'] as JsonObject;
          const decl = spec['declarative'] as JsonObject;
          const tools = decl['tools'] as JsonObject[];
          Object.assign(tools[0]!['mcpServer'] as JsonObject, patch);
          if ('runtime' in s) {
            if (s.runtime === undefined) delete decl['runtime'];
            else decl['runtime'] = s.runtime;
          }
          if (s.type === 'BYO') {
            spec['type'] = 'BYO';
            spec['byo'] = { deployment: { image: 'x' } };
          }
          if (s.extraTool)
            tools.push({
              type: 'McpServer',
              mcpServer: {
                kind: 'RemoteMCPServer',
                apiGroup: 'kagent.dev',
                name: 'tools',
                toolNames: ['get'],
              },
            });
          if (isObject(md['labels'])) {
            if (s.dropRole) delete md['labels']['retrieval.fgentic.dev/role'];
            if (s.dropManagedBy) delete md['labels']['app.kubernetes.io/managed-by'];
          }
          if (s.ownerName && Array.isArray(md['ownerReferences']))
            (md['ownerReferences'][0] as JsonObject)['name'] = s.ownerName;
          if (s.tokenEnv) decl['deployment'] = { env: [{ name: 'KAGENT_PROPAGATE_TOKEN', value: 'true' }] };
          if (s.staticIdentity) tools[0]!['headersFrom'] = [{ name: 'X-Fgentic-Identity', value: 'forged' }];
          if (s.apiVersion) a['apiVersion'] = s.apiVersion;
          const old = retrievalAgent();
          const body =
            operation === 'CREATE'
              ? admissionReview(a, { user })
              : operation === 'UPDATE'
                ? admissionReview(a, {
                    operation,
                    oldObject: fromRetrieval ? old : plainAgent('knowledge-agent', 'kagent'),
                    user,
                  })
                : admissionReview(null, { operation, oldObject: a, user });
          const w = webhookVerdict(body);
          if (w.apiserverOnly) return;
          const p = policyDenials(body);
          assert.equal(
            p.length === 0,
            w.allowed,
            `webhook: ${w.message || 'allowed'}\npolicy: ${p.join(' | ') || 'allowed'}\n${JSON.stringify(body)}`,
          );
        },
      ),
      { numRuns: 1500 },
    );
  });
});
