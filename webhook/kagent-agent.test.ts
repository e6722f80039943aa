import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  admissionReview,
  CONTROLLER,
  clone,
  plainAgent,
  platform,
  type ReviewOptions,
  retrievalAgent,
  retrievalAgentCr,
  v1alpha1Agent,
} from '../testkit/webhook.ts';
import { type ReviewOutcome, review } from './review.ts';
import type { JsonObject, KubeObject } from './rules/types.ts';
import { StaticClusterView } from './view.ts';

const view = () => new StaticClusterView([platform(), retrievalAgentCr()]);

function run(obj: KubeObject | null, opts: ReviewOptions = {}, v = view()): ReviewOutcome {
  const body = admissionReview(obj, opts);
  const out = review(JSON.parse(JSON.stringify(body)), v);
  const req = body['request'] as { uid: string };
  assert.equal(out.review.response.uid, req.uid, 'response carries the request uid');
  assert.equal(out.review.apiVersion, 'admission.k8s.io/v1');
  assert.equal(out.review.kind, 'AdmissionReview');
  return out;
}

function denied(out: ReviewOutcome, reason: string, text?: RegExp): void {
  const r = out.review.response;
  assert.equal(r.allowed, false, `expected denial (${reason})`);
  assert.equal(r.status?.code, 403);
  assert.match(r.status?.message ?? '', new RegExp(`\\[${reason}\\]`));
  if (text) assert.match(r.status?.message ?? '', text);
}

function allowed(out: ReviewOutcome): void {
  assert.equal(out.review.response.allowed, true, out.review.response.status?.message);
  assert.equal(out.review.response.status, undefined);
}

const asController: ReviewOptions = { user: CONTROLLER };

/** The first tool's mcpServer of a v1alpha2 Agent. */
function mcp(a: KubeObject, i = 0): JsonObject {
  return ((((a['spec'] as JsonObject)['declarative'] as JsonObject)['tools'] as JsonObject[])[i] as JsonObject)[
    'mcpServer'
  ] as JsonObject;
}
function decl(a: KubeObject): JsonObject {
  return (a['spec'] as JsonObject)['declarative'] as JsonObject;
}

describe('retrieval Agent: the single allowed header', () => {
  test('the rendered retrieval Agent is admitted for the controller', () => {
    const out = run(retrievalAgent(), asController);
    allowed(out);
    assert.equal(out.review.response.warnings, undefined);
  });

  test('the identity header is matched case-insensitively', () => {
    const a = retrievalAgent();
    mcp(a)['allowedHeaders'] = ['x-fgentic-identity'];
    allowed(run(a, asController));
  });

  test('omitted namespace resolves to the Agent namespace, which must be the kagent namespace', () => {
    const a = retrievalAgent();
    delete mcp(a)['namespace'];
    allowed(run(a, asController));
    const b = retrievalAgent('kb', 'team-a');
    delete mcp(b)['namespace'];
    const v = new StaticClusterView([platform(), retrievalAgentCr('kb', 'team-a')]);
    denied(run(b, asController, v), 'retrieval-tool-target', /resolves to namespace team-a/);
    const c = retrievalAgent('kb', 'team-a');
    allowed(run(c, asController, v));
  });

  for (const [header, reason] of [
    ['Authorization', 'header-credential'],
    ['cookie', 'header-credential'],
    ['X-User-Id', 'header-user-id'],
    ['*', 'header-wildcard'],
    ['x-fgentic-*', 'header-wildcard'],
    ['', 'header-empty'],
    ['X Tenant', 'header-not-token'],
    ['x-tenant-id', 'header-not-allowed'],
  ] as const) {
    test(`${JSON.stringify(header)} is denied with ${reason}`, () => {
      const a = retrievalAgent();
      mcp(a)['allowedHeaders'] = [header];
      denied(run(a, asController), reason);
    });
  }

  test('duplicates and extra entries are denied', () => {
    const a = retrievalAgent();
    mcp(a)['allowedHeaders'] = ['X-Fgentic-Identity', 'x-fgentic-identity'];
    denied(run(a, asController), 'header-duplicate', /duplicate/);
    const b = retrievalAgent();
    mcp(b)['allowedHeaders'] = [];
    denied(run(b, asController), 'allowed-headers-count');
    const c = retrievalAgent();
    mcp(c)['allowedHeaders'] = 'X-Fgentic-Identity' as unknown as string[];
    denied(run(c, asController), 'kagent-schema', /array/);
  });

  test('wrong target server is denied field by field', () => {
    for (const [k, v] of [
      ['kind', 'MCPServer'],
      ['apiGroup', ''],
      ['name', 'knowledge-retrieval-2'],
      ['namespace', 'other'],
    ] as const) {
      const a = retrievalAgent();
      mcp(a)[k] = v;
      denied(run(a, asController), 'retrieval-tool-target', new RegExp(`mcpServer\\.${k}`));
    }
  });

  test('requireApproval on a retrieval Agent is denied (the HITL resume turn skips the header refresh)', () => {
    const a = retrievalAgent();
    mcp(a)['requireApproval'] = ['search_knowledge'];
    denied(run(a, asController), 'require-approval-retrieval', /HITL/);
    const b = retrievalAgent();
    mcp(b)['requireApproval'] = [];
    denied(run(b, asController), 'require-approval-retrieval');
  });

  test('Declarative, runtime python, one tool entry, toolNames exactly [search_knowledge]', () => {
    const a = retrievalAgent();
    decl(a)['runtime'] = 'go';
    denied(run(a, asController), 'retrieval-agent-runtime');
    const b = retrievalAgent();
    delete decl(b)['runtime'];
    denied(run(b, asController), 'retrieval-agent-runtime', /explicitly/);
    const c = retrievalAgent();
    (decl(c)['tools'] as JsonObject[]).push(clone(plainAgent()['spec'] as JsonObject)['declarative'] as JsonObject);
    (decl(c)['tools'] as JsonObject[])[1] = {
      type: 'McpServer',
      mcpServer: { kind: 'RemoteMCPServer', apiGroup: 'kagent.dev', name: 'tools', toolNames: ['x'] },
    };
    denied(run(c, asController), 'retrieval-agent-tools', /exactly one tool entry, found 2/);
    for (const names of [['search_knowledge', 'other'], [], ['Search_Knowledge']]) {
      const d = retrievalAgent();
      mcp(d)['toolNames'] = names;
      denied(run(d, asController), 'retrieval-tool-names');
    }
    const e = retrievalAgent();
    delete mcp(e)['toolNames'];
    denied(run(e, asController), 'retrieval-tool-names');
    const f = retrievalAgent();
    (f['spec'] as JsonObject)['type'] = 'BYO';
    (f['spec'] as JsonObject)['byo'] = { deployment: { image: 'x' } };
    denied(run(f, asController), 'retrieval-agent-type');
  });

  test('allowedHeaders on a second tool of a retrieval Agent is denied', () => {
    const a = retrievalAgent();
    (decl(a)['tools'] as JsonObject[]).push({
      type: 'McpServer',
      mcpServer: {
        kind: 'RemoteMCPServer',
        apiGroup: 'kagent.dev',
        name: 'knowledge-retrieval',
        toolNames: ['search_knowledge'],
        allowedHeaders: ['X-Fgentic-Identity'],
      },
    });
    denied(run(a, asController), 'allowed-headers-target');
  });

  test('the Agent must be declared by a RetrievalAgent and carry both labels', () => {
    const v = new StaticClusterView([platform()]);
    denied(
      run(retrievalAgent(), asController, v),
      'retrieval-agent-undeclared',
      /no RetrievalAgent kagent\/knowledge-agent/,
    );
    const a = retrievalAgent();
    delete (a['metadata'] as { labels: Record<string, string> }).labels['retrieval.fgentic.dev/role'];
    denied(run(a, asController), 'retrieval-agent-labels');
  });

  test('an owner reference to another RetrievalAgent is denied; a missing one warns', () => {
    const a = retrievalAgent();
    ((a['metadata'] as JsonObject)['ownerReferences'] as JsonObject[])[0]!['name'] = 'other';
    denied(run(a, asController), 'retrieval-agent-owner-ref');
    const b = retrievalAgent();
    delete (b['metadata'] as JsonObject)['ownerReferences'];
    const out = run(b, asController);
    allowed(out);
    assert.match(out.review.response.warnings?.join('\n') ?? '', /owner reference/);
  });

  test('a missing RetrievalPlatform fails closed', () => {
    const v = new StaticClusterView([retrievalAgentCr()]);
    denied(run(retrievalAgent(), asController, v), 'platform-missing');
  });

  test('token propagation env and a static identity header are denied', () => {
    const a = retrievalAgent();
    decl(a)['deployment'] = { env: [{ name: 'KAGENT_PROPAGATE_TOKEN', value: 'true' }] };
    denied(run(a, asController), 'retrieval-agent-token-propagation');
    const b = retrievalAgent();
    ((decl(b)['tools'] as JsonObject[])[0] as JsonObject)['headersFrom'] = [
      { name: 'x-fgentic-identity', value: 'forged' },
    ];
    denied(run(b, asController), 'identity-header-static', /forge/);
  });
});

describe('retrieval Agent: only the reconciler may change it', () => {
  test('CREATE, UPDATE and DELETE by a user are denied', () => {
    denied(
      run(retrievalAgent()),
      'retrieval-agent-owner',
      /only system:serviceaccount:fgentic-system:fgentic-retrieval-controller may create/,
    );
    const changed = retrievalAgent();
    decl(changed)['systemMessage'] = 'changed';
    denied(run(changed, { operation: 'UPDATE', oldObject: retrievalAgent() }), 'retrieval-agent-owner', /may update/);
    denied(run(null, { operation: 'DELETE', oldObject: retrievalAgent() }), 'retrieval-agent-owner', /may delete/);
  });

  test('the controller may UPDATE and DELETE it', () => {
    const changed = retrievalAgent();
    decl(changed)['systemMessage'] = 'changed';
    allowed(run(changed, { ...asController, operation: 'UPDATE', oldObject: retrievalAgent() }));
    allowed(run(null, { ...asController, operation: 'DELETE', oldObject: retrievalAgent() }));
  });

  test('a user cannot strip the labels to escape, nor add them to claim an Agent', () => {
    const stripped = retrievalAgent('x', 'team-a');
    delete (stripped['metadata'] as JsonObject)['labels'];
    const v = new StaticClusterView([platform()]);
    denied(
      run(stripped, { operation: 'UPDATE', oldObject: retrievalAgent('x', 'team-a') }, v),
      'retrieval-agent-owner',
      /labelled/,
    );
    const claimed = plainAgent();
    (claimed['metadata'] as JsonObject)['labels'] = { 'retrieval.fgentic.dev/role': 'retrieval-agent' };
    denied(run(claimed, {}, v), 'retrieval-agent-owner');
  });

  test('an unlabelled Agent squatting a RetrievalAgent name is denied for users', () => {
    const squat = plainAgent('knowledge-agent', 'kagent');
    denied(run(squat), 'retrieval-agent-owner', /declared by RetrievalAgent kagent\/knowledge-agent/);
  });

  test('garbage collection and namespace teardown may delete it; finalizer removal is allowed', () => {
    allowed(
      run(null, {
        operation: 'DELETE',
        oldObject: retrievalAgent(),
        user: 'system:serviceaccount:kube-system:generic-garbage-collector',
      }),
    );
    const withFin = retrievalAgent();
    (withFin['metadata'] as JsonObject)['finalizers'] = ['kagent.dev/finalizer'];
    const without = retrievalAgent();
    (without['metadata'] as JsonObject)['resourceVersion'] = '2';
    allowed(
      run(without, {
        operation: 'UPDATE',
        oldObject: withFin,
        user: 'system:serviceaccount:kagent:kagent-controller',
      }),
    );
    denied(
      run(withFin, {
        operation: 'UPDATE',
        oldObject: retrievalAgent(),
        user: 'system:serviceaccount:kagent:kagent-controller',
      }),
      'retrieval-agent-owner',
    );
  });
});

describe('every other Agent', () => {
  test('an ordinary Agent is admitted', () => {
    allowed(run(plainAgent()));
  });

  test('allowedHeaders anywhere is denied with the reason per entry', () => {
    const a = plainAgent();
    mcp(a)['allowedHeaders'] = ['Authorization', 'X-Fgentic-Identity', 'x-tenant'];
    const out = run(a);
    denied(out, 'header-credential');
    denied(out, 'identity-header-non-retrieval');
    denied(out, 'allowed-headers-forbidden', /forbidden on every Agent except/);
    const b = plainAgent();
    ((decl(b)['tools'] as JsonObject[])[0] as JsonObject)['allowedHeaders'] = ['x'];
    denied(run(b), 'allowed-headers-position', /unknown field/);
    const c = plainAgent();
    decl(c)['allowedHeaders'] = ['x'];
    denied(run(c), 'allowed-headers-position');
    const d = plainAgent();
    mcp(d)['AllowedHeaders'] = ['x'];
    denied(run(d), 'allowed-headers-position');
    const e = plainAgent();
    mcp(e)['allowedHeaders'] = [];
    denied(run(e), 'allowed-headers-forbidden');
  });

  test('the retrieval RemoteMCPServer is reserved, whatever the kind or namespace', () => {
    for (const patch of [{}, { namespace: 'kagent' }, { kind: 'Service', apiGroup: '' }, { kind: '', apiGroup: '' }]) {
      const a = plainAgent();
      Object.assign(mcp(a), { name: 'knowledge-retrieval', ...patch });
      denied(run(a), 'retrieval-server-reserved');
    }
  });

  test('allowedHeaders outside spec is denied too', () => {
    const a = plainAgent();
    a['status'] = { allowedHeaders: ['x'] };
    denied(run(a), 'allowed-headers-position', /status\.allowedHeaders/);
  });

  test("a retrieval Agent cannot be used as another Agent's tool", () => {
    const a = plainAgent();
    (decl(a)['tools'] as JsonObject[]).push({
      type: 'Agent',
      agent: { name: 'knowledge-agent', namespace: 'kagent' },
    });
    denied(run(a), 'retrieval-agent-as-tool', /kagent\/knowledge-agent is a retrieval Agent/);
    const b = plainAgent('helper', 'kagent');
    (decl(b)['tools'] as JsonObject[]).push({ type: 'Agent', agent: { name: 'knowledge-agent' } });
    denied(run(b), 'retrieval-agent-as-tool');
    const c = plainAgent();
    (decl(c)['tools'] as JsonObject[]).push({
      type: 'Agent',
      agent: { name: 'other-agent', namespace: 'kagent' },
    });
    allowed(run(c));
  });

  test('requireApproval on an ordinary Agent is admitted (the gate is only forbidden for retrieval)', () => {
    const a = plainAgent();
    mcp(a)['requireApproval'] = ['get'];
    allowed(run(a));
  });

  test('spec.declarative on a BYO Agent is denied', () => {
    const a: KubeObject = {
      apiVersion: 'kagent.dev/v1alpha2',
      kind: 'Agent',
      metadata: { name: 'byo', namespace: 'team-a' },
      spec: { type: 'BYO', byo: { deployment: { image: 'x' } }, declarative: { systemMessage: 'ignored' } },
    };
    denied(run(a), 'byo-declarative', /silently ignored/);
  });

  test('UPDATE of an ordinary Agent is checked on the new object; DELETE is admitted', () => {
    const a = plainAgent();
    mcp(a)['allowedHeaders'] = ['x-user-id'];
    denied(run(a, { operation: 'UPDATE', oldObject: plainAgent() }), 'header-user-id');
    allowed(run(plainAgent(), { operation: 'UPDATE', oldObject: a }));
    allowed(run(null, { operation: 'DELETE', oldObject: a }));
  });

  test('the controller gets no exemption for ordinary Agents', () => {
    const a = plainAgent();
    mcp(a)['allowedHeaders'] = ['x-tenant'];
    denied(run(a, asController), 'allowed-headers-forbidden');
  });

  test('soft findings kagent reports only later become warnings', () => {
    const a = plainAgent();
    delete decl(a)['systemMessage'];
    delete decl(a)['runtime'];
    Object.assign(mcp(a), { kind: '', apiGroup: '', namespace: 'elsewhere', toolNames: [] });
    const out = run(a);
    allowed(out);
    const w = out.review.response.warnings?.join('\n') ?? '';
    for (const r of [
      'kagent-no-system-message',
      'kagent-runtime-default',
      'kagent-kind-empty',
      'kagent-cross-namespace',
      'kagent-all-tools',
    ])
      assert.match(w, new RegExp(r));
  });

  test('a requireApproval gate shared by name across servers warns', () => {
    const a = plainAgent();
    mcp(a)['requireApproval'] = ['get'];
    (decl(a)['tools'] as JsonObject[]).push({
      type: 'McpServer',
      mcpServer: { kind: 'RemoteMCPServer', apiGroup: 'kagent.dev', name: 'other', toolNames: ['get'] },
    });
    const out = run(a);
    allowed(out);
    assert.match(out.review.response.warnings?.join('\n') ?? '', /kagent-approval-global/);
  });
});

describe('kagent.dev/v1alpha1 (served without conversion)', () => {
  test('an ordinary v1alpha1 Agent is admitted with a warning', () => {
    const out = run(v1alpha1Agent());
    allowed(out);
    assert.match(out.review.response.warnings?.join('\n') ?? '', /v1alpha1/);
  });

  test('allowedHeaders anywhere in v1alpha1 is denied', () => {
    const a = v1alpha1Agent();
    (((a['spec'] as JsonObject)['tools'] as JsonObject[])[0]!['mcpServer'] as JsonObject)['allowedHeaders'] = [
      'X-Fgentic-Identity',
    ];
    denied(run(a), 'allowed-headers-position', /does not exist in v1alpha1/);
  });

  test('a v1alpha1 reference to knowledge-retrieval is denied, bare or namespaced', () => {
    denied(run(v1alpha1Agent('old', 'team-a', 'knowledge-retrieval')), 'retrieval-server-reserved');
    denied(run(v1alpha1Agent('old', 'team-a', 'kagent/knowledge-retrieval')), 'retrieval-server-reserved');
  });

  test('a retrieval Agent cannot be written as v1alpha1, even by the controller', () => {
    denied(run(v1alpha1Agent('knowledge-agent', 'kagent'), asController), 'retrieval-agent-version');
    denied(run(v1alpha1Agent('knowledge-agent', 'kagent')), 'retrieval-agent-owner');
  });

  test('an unknown Agent version fails closed', () => {
    const a = plainAgent();
    a['apiVersion'] = 'kagent.dev/v1beta1';
    denied(run(a), 'agent-version-unsupported');
  });
});

describe('the retrieval RemoteMCPServer', () => {
  const rms = (name = 'knowledge-retrieval', namespace = 'kagent'): KubeObject => ({
    apiVersion: 'kagent.dev/v1alpha2',
    kind: 'RemoteMCPServer',
    metadata: { name, namespace },
    spec: { description: 'retrieval', url: 'http://agentgateway-proxy.agentgateway-system:8080/mcp' },
  });

  test('only the controller may change it', () => {
    denied(run(rms()), 'retrieval-server-owner');
    allowed(run(rms(), asController));
    allowed(run(rms('tenant-tools', 'demo')));
  });

  test('a static identity header on any RemoteMCPServer is denied', () => {
    const r = rms('tenant-tools', 'demo');
    (r['spec'] as JsonObject)['headersFrom'] = [{ name: 'X-Fgentic-Identity', value: 'x' }];
    denied(run(r), 'identity-header-static');
  });
});
