/**
 * Retrieval configuration benchmark: how long a new or removed agent takes to reach the agent set the
 * retrieval server checks on every call, side by side in one run for its two sources:
 * - kubernetes: ConfigMap fgentic-retrieval-config written through the API-server double, read by the
 *   server's store as the retrieval ServiceAccount under the shipped RBAC (list + watch by name);
 * - file: retrieval.json swapped the way the kubelet updates a mounted ConfigMap (`..data` symlink
 *   renamed over), read by the file store (directory watch + 1 s poll). This starts when the new file
 *   is in place: on a cluster the kubelet's own sync (typically 60–90 s) comes before it.
 * BENCH_CHANGES alternating removals and additions per source (default 20). Prints a table and writes
 * bench/results/retrieval-config.json. Run: npm run bench:retrieval-config.
 */
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AgentRef } from '../contract/index.ts';
import { kubeRetrievalConfigStore, RETRIEVAL_CONFIGMAP } from '../retrieval/config-kube.ts';
import { fileRetrievalConfigStore, type RetrievalConfigStore } from '../retrieval/config-store.ts';
import { ApiServerDouble } from '../testkit/controller/apiserver.ts';
import { serviceAccountUser } from '../testkit/controller/rbac.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const CHANGES = Number(process.env['BENCH_CHANGES'] ?? 20);
const A: AgentRef = { namespace: 'kagent', name: 'knowledge-agent' };
const B: AgentRef = { namespace: 'team-a', name: 'late-agent' };
const text = (agents: AgentRef[]) =>
  `${JSON.stringify({ version: 1, agents, embeddings: { profile: 'local-hash-1024-v1' }, allowedOrigins: [] })}\n`;
const hasB = (store: RetrievalConfigStore) => {
  const s = store.current();
  return s.ready && s.config.agents.some((a) => a.name === B.name);
};

async function waitFor(probe: () => boolean, limitMs = 30_000): Promise<number> {
  const start = performance.now();
  while (!probe()) {
    if (performance.now() - start > limitMs) throw new Error('change not seen within 30 s');
    await new Promise((r) => setTimeout(r, 1));
  }
  return performance.now() - start;
}

/** Alternately removes and adds B; returns [removal ms[], addition ms[]]. */
async function measure(
  store: RetrievalConfigStore,
  write: (agents: AgentRef[]) => void,
): Promise<[number[], number[]]> {
  const removed: number[] = [];
  const added: number[] = [];
  write([A, B]);
  await waitFor(() => hasB(store));
  for (let i = 0; i < CHANGES; i++) {
    const removal = i % 2 === 0;
    write(removal ? [A] : [A, B]);
    const ms = await waitFor(() => hasB(store) !== removal);
    (removal ? removed : added).push(ms);
    // Spread the changes out: a real removal does not arrive in the middle of the previous one.
    await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
  }
  return [removed, added];
}

async function kubernetes(): Promise<[number[], number[]]> {
  const api = await new ApiServerDouble().start();
  const configMap = (agents: AgentRef[]) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: RETRIEVAL_CONFIGMAP, namespace: 'knowledge' },
    data: { 'retrieval.json': text(agents) },
  });
  api.put(configMap([A]));
  const store = kubeRetrievalConfigStore({
    kubeConfig: api.kubeConfig(serviceAccountUser('knowledge', 'knowledge-retrieval')),
    namespace: 'knowledge',
  });
  try {
    await store.synced;
    const result = await measure(store, (agents) => api.put(configMap(agents)));
    if (api.denied.length > 0) throw new Error('the API-server double refused a request');
    return result;
  } finally {
    store.close();
    await api.stop();
  }
}

async function file(): Promise<[number[], number[]]> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-retrieval-config-'));
  let n = 0;
  const swap = (agents: AgentRef[]) => {
    n += 1;
    mkdirSync(join(dir, `..v${n}`));
    writeFileSync(join(dir, `..v${n}`, 'retrieval.json'), text(agents));
    symlinkSync(`..v${n}`, join(dir, `..tmp${n}`));
    renameSync(join(dir, `..tmp${n}`), join(dir, '..data'));
  };
  swap([A]);
  symlinkSync('..data/retrieval.json', join(dir, 'retrieval.json'));
  const store = fileRetrievalConfigStore(join(dir, 'retrieval.json'));
  try {
    return await measure(store, swap);
  } finally {
    store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN;
};
const median = (xs: number[]) => quantile(xs, 0.5);

const [kubeRemoved, kubeAdded] = await kubernetes();
const [fileRemoved, fileAdded] = await file();
const row = (label: string, xs: number[]) =>
  [label, `median ${median(xs).toFixed(1)} ms, max ${Math.max(...xs).toFixed(1)} ms`] as [string, string];
const rows: [string, string][] = [
  row(`kubernetes: agent removed → denied (${kubeRemoved.length})`, kubeRemoved),
  row(`kubernetes: agent added → served (${kubeAdded.length})`, kubeAdded),
  row(`file (after the kubelet sync): removed → denied (${fileRemoved.length})`, fileRemoved),
  row(`file (after the kubelet sync): added → served (${fileAdded.length})`, fileAdded),
  ['removal median ratio file ÷ kubernetes', (median(fileRemoved) / median(kubeRemoved)).toFixed(2)],
  ['file source on a cluster', 'plus the kubelet sync of the mounted ConfigMap first (60–90 s, not measured here)'],
  ['goal', 'a removal denied < 2000 ms after the API change'],
];
const w = Math.max(...rows.map((r) => r[0].length));
for (const [k, v] of rows) process.stdout.write(`${k.padEnd(w)}  ${v}\n`);
mkdirSync(join(HERE, 'results'), { recursive: true });
writeFileSync(
  join(HERE, 'results', 'retrieval-config.json'),
  `${JSON.stringify(
    {
      changes: CHANGES,
      kubernetes: { removedMs: kubeRemoved, addedMs: kubeAdded },
      file: { removedMs: fileRemoved, addedMs: fileAdded },
      loadAverage: (await import('node:os')).loadavg(),
    },
    null,
    2,
  )}\n`,
);
