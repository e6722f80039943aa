/**
 * The controller under faults, against the API-server double with short fault windows (the full
 * 20 s schedules are in `npm run bench:controller -- --faults`): the write rate never exceeds the
 * client-side limiter; a 429's Retry-After pauses every write; while writes fail, only the objects
 * whose own state changed get a status write, and the change still pending lands within 2 s of the
 * fault's end; a corrected version of a failing object does not wait out the old one's backoff.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { quietFor, waitFor } from '../testkit/common/index.ts';
import { ApiServerDouble, type RequestInfo } from '../testkit/controller/apiserver.ts';
import { examples, room } from '../testkit/controller/fixtures.ts';
import { type ControllerHandle, startController } from './cli.ts';

const RV = 'retrieval.fgentic.dev/v1alpha1';
const QPS = 10;
const BURST = 10;

describe('controller under faults', () => {
  const api = new ApiServerDouble();
  let ctl: ControllerHandle;
  /** Every request the controller sent (leader election aside), with its time. */
  const log: { at: number; method: string; path: string; status?: number }[] = [];
  const input = examples();
  for (let i = 0; i < 40; i++) input.rooms.push(room(`extra-${i}`, `!extra${i}:org-a.example`));

  const writes = (from: number, to = Date.now()) =>
    log.filter((r) => r.method !== 'GET' && !r.path.includes('/leases') && r.at >= from && r.at <= to);
  const settle = () =>
    quietFor('the controller', () => api.requests.filter((r) => !r.includes('/leases')).length, {
      step: () => ctl.idle(),
      intervalMs: 50,
    });
  /** Faults for writes to paths matching `match` (leader election never faulted here). */
  const failWrites = (f: (r: RequestInfo) => ReturnType<NonNullable<ApiServerDouble['fault']>>) => {
    api.fault = (r) => {
      if (r.path.includes('/leases') || r.method === 'GET') return undefined;
      return f(r);
    };
  };

  before(async () => {
    await api.start();
    for (const r of [...input.platforms, ...input.agents, ...input.rooms, ...input.partners]) api.put(r);
    // A recorder in front of every fault: the double's own request log has no times.
    const inner = { fault: undefined as ApiServerDouble['fault'] };
    Object.defineProperty(api, 'fault', {
      get: () => (r: RequestInfo) => {
        if (!r.path.includes('/leases')) log.push({ at: Date.now(), method: r.method, path: r.path });
        return inner.fault?.(r);
      },
      set: (f) => {
        inner.fault = f;
      },
    });
    ctl = await startController({
      kubeConfig: api.kubeConfig(),
      port: 0,
      leaseNamespace: 'fgentic-system',
      identity: 'faults',
      debounceMs: 20,
      heartbeatPeriodMs: 3_600_000,
      qps: 1000,
      burst: 1000,
    });
    await waitFor('converged', () =>
      input.rooms.every((r) =>
        api
          .get(RV, 'RetrievalRoom', undefined, r.metadata.name)
          ?.['status']?.conditions?.some((c: { type: string; status: string }) => c.type === 'Ready'),
      ),
    );
    await settle();
    ctl.limiter.setRate(QPS, BURST);
  });
  after(async () => {
    await ctl?.stop();
    await api.stop();
  });

  it('500 on every write: status only for what changed, the change lands within 2 s of the end', async () => {
    const start = Date.now();
    failWrites(() => ({ status: 500, reason: 'InternalError' }));
    const r = api.get(RV, 'RetrievalRoom', undefined, 'extra-7') as any;
    api.put({
      ...r,
      spec: { ...r.spec, allowedClassifications: ['approved_non_public', 'public'], agreementRef: 'a' },
    });
    await new Promise((res) => setTimeout(res, 2_000));
    api.fault = undefined;
    const end = Date.now();
    const during = writes(start, end);
    // Only extra-7's own state changed: its entry, the manifest/inline file, its status. Every
    // attempt is one of those, on its own backoff (5 ms doubling, capped at 1 s).
    const targets = new Set(during.map((w) => w.path));
    assert.deepEqual([...targets].sort(), [
      '/api/v1/namespaces/knowledge/configmaps/fgentic-projector-config',
      '/apis/retrieval.fgentic.dev/v1alpha1/retrievalrooms/extra-7/status',
    ]);
    for (const t of targets) {
      const n = during.filter((w) => w.path === t).length;
      assert.ok(n <= 12, `${n} attempts at ${t} in 2 s`);
    }
    const landed = await waitFor('the change applied', () => {
      const text = api.get('v1', 'ConfigMap', 'knowledge', 'fgentic-projector-config')?.['data']['projector.json'];
      return (
        String(text).includes(
          '{"roomId":"!extra7:org-a.example","allowedClassifications":["approved_non_public","public"]}',
        ) && Date.now()
      );
    });
    assert.ok(landed - end <= 2_000, `landed ${landed - end} ms after the fault ended`);
    await settle();
    const cond = api.get(RV, 'RetrievalRoom', undefined, 'extra-7')?.['status'].conditions;
    assert.equal(cond.find((c: { type: string }) => c.type === 'Ready').status, 'True');
  });

  it('429 with Retry-After on the registry only: one status write per changed room, none for others', async () => {
    const start = Date.now();
    failWrites((r) =>
      r.path.endsWith('/configmaps/fgentic-projector-config')
        ? { status: 429, reason: 'TooManyRequests', retryAfterSeconds: 1 }
        : undefined,
    );
    for (const name of ['extra-1', 'extra-2']) {
      const r = api.get(RV, 'RetrievalRoom', undefined, name) as any;
      api.put({
        ...r,
        spec: { ...r.spec, allowedClassifications: ['approved_non_public', 'public'], agreementRef: 'b' },
      });
    }
    await new Promise((res) => setTimeout(res, 2_500));
    api.fault = undefined;
    const during = writes(start);
    const cm = during.filter((w) => w.path.endsWith('/fgentic-projector-config'));
    // Retry-After: 1 pauses every write: at most one attempt per second (plus the first).
    assert.ok(cm.length <= 4, `${cm.length} attempts in 2.5 s with Retry-After: 1`);
    const statuses = during.filter((w) => w.path.endsWith('/status')).map((w) => w.path);
    // The two rooms whose change is held report it (once each); nobody else's status is written.
    assert.deepEqual([...new Set(statuses)].sort(), [
      '/apis/retrieval.fgentic.dev/v1alpha1/retrievalrooms/extra-1/status',
      '/apis/retrieval.fgentic.dev/v1alpha1/retrievalrooms/extra-2/status',
    ]);
    assert.ok(statuses.length <= 2, `${statuses.length} status writes for 2 changed rooms`);
    await settle();
  });

  it("a corrected version of a failing object is applied at once, not after the old one's backoff", async () => {
    const policy = 'fgentic-mcp.kagent.knowledge-agent';
    const applied = () =>
      api.get('agentgateway.dev/v1alpha1', 'AgentgatewayPolicy', 'agentgateway-system', policy)?.['spec'].traffic
        .rateLimit.local[0].requests;
    const attempts = () => api.applies.filter((a) => a.name === policy).length;
    const a = api.get(RV, 'RetrievalAgent', 'kagent', 'knowledge-agent') as any;
    api.failApplyObjects.add(`AgentgatewayPolicy/agentgateway-system/${policy}`);
    const before = attempts();
    api.put({ ...a, spec: { ...a.spec, rateLimit: { requestsPerMinute: 13 } } });
    // Let it fail until its backoff is at the 1 s cap (5 ms doubling: the 9th failure).
    await waitFor('eight failures', () => attempts() >= before + 8, 10_000);
    api.failApplyObjects.clear();
    const fixed = Date.now();
    api.put({ ...a, spec: { ...a.spec, rateLimit: { requestsPerMinute: 17 } } });
    await waitFor('the corrected version applied', () => applied() === 17 && Date.now());
    const took = Date.now() - fixed;
    assert.ok(took < 600, `applied ${took} ms after the fix (the old backoff was up to 1 s)`);
    await settle();
  });

  it('the write rate never exceeds the limiter: burst + QPS × t over any window', async () => {
    // A platform change re-renders every object; with writes failing, every object retries.
    const start = Date.now();
    failWrites(() => ({ status: 500, reason: 'InternalError' }));
    const p = api.get(RV, 'RetrievalPlatform', undefined, 'default') as any;
    api.put({ ...p, spec: { ...p.spec, publicRetrievalTimeoutSeconds: 42 } });
    await new Promise((res) => setTimeout(res, 3_000));
    api.fault = undefined;
    await settle();
    const all = writes(start).map((w) => w.at);
    assert.ok(all.length > BURST, `${all.length} writes: the limiter was exercised`);
    for (let i = 0; i < all.length; i++)
      for (let j = i; j < all.length; j++) {
        const span = (all[j] as number) - (all[i] as number);
        const allowed = BURST + (QPS * span) / 1000 + 1; // +1: a request in flight at the window's edge
        assert.ok(j - i + 1 <= allowed, `${j - i + 1} writes within ${span} ms (allowed ${allowed})`);
      }
  });
});
