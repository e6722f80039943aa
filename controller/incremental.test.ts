/**
 * O(change) writes, against the API-server double as the controller's ServiceAccount under the
 * shipped RBAC: a no-op pass writes nothing, a RetrievalRoom change rewrites the registry and the
 * room's status only, a RetrievalAgent change writes its own objects only, and a failing object
 * neither stops the others nor is given up: it is retried on its backoff until it applies.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { quietFor, waitFor as waitUntil } from '../testkit/common/index.ts';
import { ApiServerDouble, CONTROLLER_USER } from '../testkit/controller/apiserver.ts';
import { agent, examples, REPO, room } from '../testkit/controller/fixtures.ts';
import { type Attributes, RbacAuthorizer } from '../testkit/controller/rbac.ts';
import { type ControllerHandle, startController } from './cli.ts';
import { render } from './render/index.ts';

const RV = 'retrieval.fgentic.dev/v1alpha1';
const MCP_KEY = 'mcp-key-0123456789abcdef';
const WRITES = new Set(['create', 'patch', 'update', 'delete']);

const waitFor = <T>(what: string, f: () => T | undefined | false, ms = 15_000): Promise<T> => waitUntil(what, f, ms);
const cond = (o: any, type: string) => o?.status?.conditions?.find((c: any) => c.type === type);
const show = (a: Attributes) =>
  `${a.verb} ${a.resource}${a.subresource ? `/${a.subresource}` : ''} ${a.namespace ?? ''}/${a.name ?? ''}`;

describe('controller writes O(change), as its ServiceAccount under the shipped RBAC', () => {
  // The overlay an operator writes for a second RetrievalAgent: its mirror's name (deploy/README.md).
  const api = new ApiServerDouble({
    rbac: RbacAuthorizer.fromKustomizeWithNames(join(REPO, 'deploy', 'base'), {
      'agentgateway-system/fgentic-retrieval-controller-mcp-key-mirrors': ['fgentic-mcp-key.kagent.second-agent'],
    }),
  });
  let ctl: ControllerHandle;
  const input = examples();
  // A second agent that shares the example's MCP key Secret (the shipped Role names that one).
  input.agents.push(agent('kagent', 'second-agent'));
  for (let i = 0; i < 20; i++) input.rooms.push(room(`extra-${i}`, `!extra${i}:org-a.example`));
  const expected = render(input).objects;

  /** The controller's writes (leader election aside) during `act`, once it is idle again. */
  const writesDuring = async (act: () => void | Promise<void>): Promise<string[]> => {
    await settle();
    const n = api.calls.length;
    await act();
    await settle();
    return api.calls
      .slice(n)
      .filter((c) => c.user === CONTROLLER_USER && WRITES.has(c.verb) && c.resource !== 'leases')
      .map(show)
      .sort();
  };
  /** Idle, and no request but leader election for QUIET_MS (a watch event may still be on its way). */
  const settle = () =>
    quietFor('the controller', () => api.requests.filter((r) => !r.includes('/leases')).length, {
      step: () => ctl.idle(),
      intervalMs: 50,
    });

  before(async () => {
    await api.start();
    for (const r of [...input.platforms, ...input.agents, ...input.rooms, ...input.partners]) api.put(r);
    api.put({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'knowledge-agent-mcp-credential', namespace: 'kagent' },
      type: 'Opaque',
      data: { authorization: Buffer.from(`Bearer ${MCP_KEY}`).toString('base64') },
    });
    ctl = await startController({
      kubeConfig: api.kubeConfig(),
      port: 0,
      leaseNamespace: 'fgentic-system',
      identity: 'incremental',
      renewIntervalMs: 500,
      debounceMs: 20,
      // The heartbeat is a timed write of its own (controller/heartbeat.test.ts); not counted here.
      heartbeatPeriodMs: 3_600_000,
    });
    await waitFor(
      'every object applied and every resource Ready',
      () =>
        expected.every((o) => api.get(o.apiVersion, o.kind, o.metadata.namespace, o.metadata.name)) &&
        [...input.agents, ...input.rooms].every(
          (r) => cond(api.get(RV, r.kind, r.metadata.namespace, r.metadata.name), 'Ready')?.status === 'True',
        ),
    );
  });
  after(async () => {
    await ctl?.stop();
    await api.stop();
  });

  it('a no-op resync writes nothing (every desired object matches its live hash, every mirror read by name matches)', async () => {
    assert.deepEqual(await writesDuring(() => ctl.resync()), []);
    const cm = api.get('v1', 'ConfigMap', 'knowledge', 'fgentic-projector-config');
    assert.match(cm?.['metadata'].annotations['retrieval.fgentic.dev/desired-hash'], /^[0-9a-f]{64}$/);
  });

  it('an event that changes nothing rendered writes nothing (no status rewrite either)', async () => {
    const r = api.get(RV, 'RetrievalRoom', undefined, 'extra-3') as any;
    const writes = await writesDuring(() => {
      api.put({ ...r, metadata: { ...r.metadata, labels: { team: 'a' } } });
    });
    assert.deepEqual(writes, []);
  });

  it('one RetrievalRoom change: the registry ConfigMap and that room status, nothing else (≤ 3 writes)', async () => {
    const r = api.get(RV, 'RetrievalRoom', undefined, 'extra-5') as any;
    const writes = await writesDuring(() => {
      api.put({
        ...r,
        spec: { ...r.spec, allowedClassifications: ['approved_non_public', 'public'], agreementRef: 'a-1' },
      });
    });
    assert.deepEqual(writes, [
      'patch configmaps knowledge/fgentic-projector-config',
      'patch retrievalrooms/status /extra-5',
    ]);
    assert.match(
      api.get('v1', 'ConfigMap', 'knowledge', 'fgentic-projector-config')?.['data']['projector.json'],
      /"roomId":"!extra5:org-a\.example","allowedClassifications":\["approved_non_public","public"\]/,
    );
  });

  it('one RetrievalAgent change writes its own objects and status only', async () => {
    const a = api.get(RV, 'RetrievalAgent', 'kagent', 'second-agent') as any;
    const writes = await writesDuring(() => {
      api.put({ ...a, spec: { ...a.spec, rateLimit: { requestsPerMinute: 7 } } });
    });
    assert.deepEqual(writes, [
      'patch agentgatewaypolicies agentgateway-system/fgentic-mcp.kagent.second-agent',
      'patch retrievalagents/status kagent/second-agent',
    ]);
  });

  it('a failing object does not stop the others, is reported, and is retried until it applies', async () => {
    const failing = 'fgentic-mcp.kagent.knowledge-agent';
    api.failApplyObjects.add(`AgentgatewayPolicy/agentgateway-system/${failing}`);
    const attempts = () => api.applies.filter((x) => x.name === failing).length;
    const before = attempts();
    for (const name of ['knowledge-agent', 'second-agent']) {
      const a = api.get(RV, 'RetrievalAgent', 'kagent', name) as any;
      api.put({ ...a, spec: { ...a.spec, rateLimit: { requestsPerMinute: 11 } } });
    }
    // The other agent's policy applies although this one fails.
    await waitFor(
      'the other policy applied',
      () =>
        api.get(
          'agentgateway.dev/v1alpha1',
          'AgentgatewayPolicy',
          'agentgateway-system',
          'fgentic-mcp.kagent.second-agent',
        )?.['spec'].traffic.rateLimit.local[0].requests === 11,
    );
    // The failure is its owner's condition alone: the RetrievalAgent whose policy it is.
    const p = await waitFor('Degraded names the failing object', () => {
      const x = api.get(RV, 'RetrievalAgent', 'kagent', 'knowledge-agent');
      return cond(x, 'Degraded')?.status === 'True' && x;
    });
    for (const [kind, ns, name] of [
      ['RetrievalPlatform', undefined, 'default'],
      ['RetrievalAgent', 'kagent', 'second-agent'],
      ['RetrievalRoom', undefined, 'extra-1'],
    ] as const)
      assert.equal(cond(api.get(RV, kind, ns, name), 'Ready')?.status, 'True', `${kind} ${name} stays Ready`);
    assert.match(
      cond(p, 'Degraded').message,
      new RegExp(`^apply AgentgatewayPolicy agentgateway-system/${failing}: HTTP 500`),
    );
    // Retried without any further change (its backoff schedule drives the passes).
    await waitFor('four retries', () => attempts() >= before + 4);
    api.failApplyObjects.clear();
    await waitFor(
      'applied at last',
      () =>
        api.get('agentgateway.dev/v1alpha1', 'AgentgatewayPolicy', 'agentgateway-system', failing)?.['spec'].traffic
          .rateLimit.local[0].requests === 11,
    );
    await waitFor(
      'recovered',
      () => cond(api.get(RV, 'RetrievalAgent', 'kagent', 'knowledge-agent'), 'Degraded')?.status === 'False',
    );
    // Once recovered, passes go quiet again.
    assert.deepEqual(await writesDuring(() => ctl.resync()), []);
  });

  it('nothing the controller did was refused by the shipped RBAC (with the second mirror named)', () => {
    assert.deepEqual(api.denied.map(show), []);
  });
});
