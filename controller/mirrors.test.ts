/**
 * The MCP key mirrors on a resync, against the API-server double as the controller's ServiceAccount
 * under the shipped RBAC (one mirror name per agent, as an operator's overlay adds them): a no-op
 * resync reads every mirror by name and writes none; a mirror edited, relabelled, disowned or deleted
 * behind the controller is written again on the next resync, and nothing else is. The heartbeat is
 * the controller's liveness signal, a timed write of its own and not part of a resync: its timer is
 * set beyond the test here (controller/heartbeat.test.ts covers it).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { quietFor, waitFor } from '../testkit/common/index.ts';
import { ApiServerDouble, CONTROLLER_USER } from '../testkit/controller/apiserver.ts';
import { agent, examples, REPO } from '../testkit/controller/fixtures.ts';
import { type Attributes, RbacAuthorizer } from '../testkit/controller/rbac.ts';
import { type ControllerHandle, startController } from './cli.ts';
import { mirrorName } from './kube/mcp-keys.ts';

const RV = 'retrieval.fgentic.dev/v1alpha1';
const MCP_KEY = 'mcp-key-0123456789abcdef';
const GATEWAY = 'agentgateway-system';
const WRITES = new Set(['create', 'patch', 'update', 'delete']);
const N = 40;

const cond = (o: any, type: string) => o?.status?.conditions?.find((c: any) => c.type === type);
const show = (a: Attributes) =>
  `${a.verb} ${a.resource}${a.subresource ? `/${a.subresource}` : ''} ${a.namespace ?? ''}/${a.name ?? ''}`;

describe(`MCP key mirrors at ${N} agents: read on a resync, written only when they differ`, () => {
  const input = examples();
  for (let i = 1; i < N; i++) input.agents.push(agent('kagent', `agent-${String(i).padStart(2, '0')}`));
  const names = input.agents.map((a) => mirrorName('kagent', a.metadata.name));
  const api = new ApiServerDouble({
    rbac: RbacAuthorizer.fromKustomizeWithNames(join(REPO, 'deploy', 'base'), {
      [`${GATEWAY}/fgentic-retrieval-controller-mcp-key-mirrors`]: names.slice(1),
    }),
  });
  let ctl: ControllerHandle;
  const mirror = (name: string) => api.get('v1', 'Secret', GATEWAY, name) as any;

  /** Idle, and no request but leader election for QUIET_MS. */
  const settle = () =>
    quietFor('the controller', () => api.requests.filter((r) => !r.includes('/leases')).length, {
      step: () => ctl.idle(),
      intervalMs: 50,
    });
  /** The controller's calls (leader election aside) during `act`, once it is idle again. */
  const callsDuring = async (act: () => void): Promise<Attributes[]> => {
    await settle();
    const n = api.calls.length;
    act();
    await settle();
    return api.calls.slice(n).filter((c) => c.user === CONTROLLER_USER && c.resource !== 'leases');
  };
  const writes = (calls: Attributes[]) =>
    calls
      .filter((c) => WRITES.has(c.verb))
      .map(show)
      .sort();

  before(async () => {
    await api.start();
    for (const r of [...input.platforms, ...input.agents, ...input.rooms, ...input.partners]) api.put(r);
    // Every agent names the example's key Secret (the one the shipped reader Role grants).
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
      identity: 'mirrors',
      renewIntervalMs: 500,
      debounceMs: 20,
      heartbeatPeriodMs: 3_600_000,
    });
    await waitFor(
      'every mirror written and every agent Ready',
      () =>
        names.every((n) => mirror(n)) &&
        input.agents.every(
          (a) => cond(api.get(RV, a.kind, a.metadata.namespace, a.metadata.name), 'Ready')?.status === 'True',
        ),
      30_000,
    );
  });
  after(async () => {
    await ctl?.stop();
    await api.stop();
  });

  it(`a no-op resync at ${N} agents makes 0 writes: each mirror is read by name, none is written`, async () => {
    const calls = await callsDuring(() => ctl.resync());
    assert.deepEqual(writes(calls), []);
    const mirrorReads = calls.filter((c) => c.resource === 'secrets' && c.namespace === GATEWAY);
    assert.deepEqual(mirrorReads.map((c) => c.verb).sort(), Array(N).fill('get'));
    assert.deepEqual(mirrorReads.map((c) => c.name).sort(), [...names].sort());
    assert.deepEqual(api.denied.map(show), [], 'nothing refused');
  });

  it('between resyncs an event reads no mirror and writes none', async () => {
    const a = api.get(RV, 'RetrievalAgent', 'kagent', 'agent-07') as any;
    const calls = await callsDuring(() => {
      api.put({ ...a, metadata: { ...a.metadata, labels: { team: 'b' } } });
    });
    assert.deepEqual(writes(calls), []);
    assert.ok(!calls.some((c) => c.resource === 'secrets' && c.namespace === GATEWAY));
  });

  it('a drifted or deleted mirror is repaired on the next resync, and no other is written', async () => {
    const [edited, relabelled, disowned, deleted] = [names[3], names[11], names[17], names[29]] as [
      string,
      string,
      string,
      string,
    ];
    const want = structuredClone(mirror(edited));
    const calls = await callsDuring(() => {
      const e = mirror(edited);
      const key = Object.keys(e.data)[0] as string;
      api.put({ ...e, data: { [key]: Buffer.from('{"key":"someone-else-s-key-000"}').toString('base64') } });
      const r = mirror(relabelled);
      api.put({ ...r, metadata: { ...r.metadata, labels: { 'retrieval.fgentic.dev/api-key': 'other' } } });
      const d = mirror(disowned);
      const { ownerReferences: _o, ...meta } = d.metadata;
      api.put({ ...d, metadata: meta });
      api.remove('v1', 'Secret', GATEWAY, deleted);
      ctl.resync();
    });
    // One server-side apply each (the one that recreates the deleted mirror is authorized as a
    // create too).
    assert.deepEqual(
      writes(calls),
      [
        `create secrets ${GATEWAY}/${deleted}`,
        ...[edited, relabelled, disowned, deleted].map((n) => `patch secrets ${GATEWAY}/${n}`),
      ].sort(),
    );
    assert.deepEqual(mirror(edited).data, want.data, 'data restored');
    assert.equal(mirror(relabelled).metadata.labels['retrieval.fgentic.dev/api-key'], 'mcp', 'label restored');
    assert.equal(mirror(disowned).metadata.ownerReferences?.[0]?.kind, 'AgentgatewayPolicy', 'owner restored');
    assert.ok(mirror(deleted), 'recreated');
    // And the resync after that is quiet again.
    assert.deepEqual(writes(await callsDuring(() => ctl.resync())), []);
  });

  // Nor does it write a room status before its first pass has said what the platform is (it would
  // flap every room to NoPlatform and back, with two Events each).
  it('a new term writes no mirror (nor anything else) that is already right', async () => {
    await settle();
    await ctl.stop();
    const n = api.calls.length;
    ctl = await startController({
      kubeConfig: api.kubeConfig(),
      port: 0,
      leaseNamespace: 'fgentic-system',
      identity: 'mirrors-2',
      leaseDurationSeconds: 1,
      renewIntervalMs: 150,
      debounceMs: 20,
      heartbeatPeriodMs: 3_600_000,
    });
    await waitFor('the new replica leads', () => ctl.isLeader(), 10_000);
    await waitFor('a pass', () => ctl.reconciles() > 0, 10_000);
    await settle();
    const calls = api.calls.slice(n).filter((c) => c.user === CONTROLLER_USER && c.resource !== 'leases');
    assert.deepEqual(writes(calls), []);
    assert.equal(calls.filter((c) => c.resource === 'secrets' && c.namespace === GATEWAY).length, N);
  });

  it('the shipped RBAC (with the mirror names) refused nothing', () => {
    assert.deepEqual(api.denied.map(show), []);
  });
});
