/**
 * The API-server double of `bench:controller -- --revocation | --faults` in a process of its own
 * (started by bench/double-process.ts), so serving 100,000 rooms never takes the event loop of the
 * controller under measurement. It seeds the cluster (bench/controller-scale-cluster.ts), logs every
 * request with its time, applies the fault schedule it is told to, and answers the parent's calls
 * over the IPC channel. It exits when the parent goes away.
 */
import { ApiServerDouble, type Fault, type RequestInfo } from '../testkit/controller/apiserver.ts';
import { corpus, LATENCY, rbac, seed } from './controller-scale-cluster.ts';

export interface Req {
  at: number;
  method: string;
  path: string;
}

const write = (q: RequestInfo) => q.method !== 'GET' && !q.path.includes('/leases');
/** The fault schedules by name (bench/controller-scale.ts `faults`). */
const FAULTS: Record<string, (q: RequestInfo) => Fault | undefined> = {
  '500-writes': (q) => (write(q) ? { status: 500, reason: 'InternalError' } : undefined),
  '429-writes': (q) => (write(q) ? { status: 429, reason: 'TooManyRequests', retryAfterSeconds: 1 } : undefined),
  '429-registry': (q) =>
    q.method !== 'GET' && /\/configmaps\/fgentic-projector-/.test(q.path)
      ? { status: 429, reason: 'TooManyRequests', retryAfterSeconds: 1 }
      : undefined,
  'lease-500': (q) => (q.path.includes('/leases') ? { status: 500, reason: 'InternalError' } : undefined),
};

const send = (m: unknown) => process.send?.(m);
process.on('disconnect', () => process.exit(0));

const api = await new ApiServerDouble({ latencyMs: LATENCY, rbac: rbac() }).start();
api.historyLimit = 1_000_000;
await seed(api, corpus());
// Forget the seeding's history (as etcd compaction would): 200,000 object versions held in this
// process would cost it its heap.
api.compact();
api.historyLimit = 100_000;

/** Writes (leases aside), in order; and when the last one that was not a heartbeat arrived. */
const writes: Req[] = [];
let lastWriteAt = 0;
let fault: ((q: RequestInfo) => Fault | undefined) | undefined;
api.fault = (q) => {
  if (write(q)) {
    const at = Date.now();
    writes.push({ at, method: q.method, path: q.path });
    if (!q.path.includes('heartbeat')) lastWriteAt = at;
  }
  return fault?.(q);
};

type Op = (...args: any[]) => unknown;
const ops: Record<string, Op> = {
  token: (user: string) => api.token(user),
  get: (apiVersion: string, kind: string, ns: string | undefined, name: string) => api.get(apiVersion, kind, ns, name),
  /** Resolves with when the change was made (this process's clock: the machine's wall clock). */
  put: (obj: Record<string, unknown>) => {
    api.put(obj);
    return Date.now();
  },
  remove: (apiVersion: string, kind: string, ns: string | undefined, name: string) => {
    api.remove(apiVersion, kind, ns, name);
    return Date.now();
  },
  setFault: (name: string | undefined) => {
    if (name !== undefined && !FAULTS[name]) throw new Error(`unknown fault ${name}`);
    fault = name === undefined ? undefined : FAULTS[name];
  },
  lastWriteAt: () => lastWriteAt,
  writes: (from: number, to: number) => writes.filter((w) => w.at >= from && w.at < to),
  stop: async () => {
    await api.stop();
  },
};

process.on('message', async (m: { id: number; op: string; args: unknown[] }) => {
  try {
    const op = ops[m.op];
    if (!op) throw new Error(`unknown op ${m.op}`);
    send({ id: m.id, ok: true, value: await op(...m.args) });
  } catch (e) {
    send({ id: m.id, ok: false, error: (e as Error).message });
  }
});
send({ ready: true, port: api.port });
