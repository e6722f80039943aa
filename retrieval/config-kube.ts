/**
 * The retrieval server's configuration read through the Kubernetes API: a list + watch of the one
 * ConfigMap `fgentic-retrieval-config` (key `retrieval.json`) in the server's namespace, selected by
 * `metadata.name` so that its Role can name the object (`resourceNames`). A new or removed
 * RetrievalAgent reaches the per-request agent check as soon as the watch event arrives, instead of
 * after the kubelet's sync of a mounted ConfigMap (60–90 s), and without a restart.
 *
 * Staleness rule (the projector's): while the watch is open, or within `maxStalenessMs` of the last
 * contact with the API server, the configuration of config-store.ts serves; beyond that every call is
 * refused and readiness is false until contact is back. A silently dead connection is noticed by the
 * watch's watchdog (common/kube-watch.ts) `watchTimeoutSeconds + 5 s` after its last sign of life, so
 * the worst case is that plus `maxStalenessMs`.
 */
import type * as k8s from '@kubernetes/client-node';
import { watchConfigMaps } from '../common/kube-watch.ts';
import {
  configTracker,
  type ReloadEvents,
  type RetrievalConfigState,
  type RetrievalConfigStore,
} from './config-store.ts';

export const RETRIEVAL_CONFIGMAP = 'fgentic-retrieval-config';
const KEY = 'retrieval.json';

export interface KubeRetrievalConfigOptions extends ReloadEvents {
  readonly kubeConfig: k8s.KubeConfig;
  readonly namespace: string;
  /** Serve the last configuration at most this long without API contact (default 30 s). */
  readonly maxStalenessMs?: number;
  /** Server-side watch timeout; a quiet watch is re-established this often (default 20 s). */
  readonly watchTimeoutSeconds?: number;
  readonly now?: () => number;
  /** A failed list or watch (`list`/`watch`) and the error's class, for logs and metrics. */
  readonly onWatchError?: (kind: string, error: string) => void;
}

export interface KubeRetrievalConfigStore extends RetrievalConfigStore {
  stalenessSeconds(): number;
  /** Resolves once the first list is in and its watch is open (or after the first failure). */
  readonly synced: Promise<void>;
}

export function kubeRetrievalConfigStore(o: KubeRetrievalConfigOptions): KubeRetrievalConfigStore {
  const maxStaleness = o.maxStalenessMs ?? 30_000;
  const tracker = configTracker({
    ...(o.onReload ? { onReload: o.onReload } : {}),
  });
  const watch = watchConfigMaps({
    kubeConfig: o.kubeConfig,
    namespace: o.namespace,
    fieldSelector: `metadata.name=${RETRIEVAL_CONFIGMAP}`,
    ...(o.watchTimeoutSeconds !== undefined ? { watchTimeoutSeconds: o.watchTimeoutSeconds } : {}),
    ...(o.now ? { now: o.now } : {}),
    onObjects: (objects) => {
      tracker.apply(objects.get(RETRIEVAL_CONFIGMAP)?.data?.[KEY]);
      notify();
    },
    ...(o.onWatchError ? { onWatchError: o.onWatchError } : {}),
  });
  const current = (): RetrievalConfigState => {
    const s = tracker.state();
    if (watch.contactAgeMs() <= maxStaleness) return s;
    return {
      ready: false,
      error: 'configuration stale: no contact with the API server',
      generation: s.generation,
    };
  };
  // Reports each state once: a reload, or the moment the staleness bound is crossed (either way).
  let reported: RetrievalConfigState | undefined;
  const notify = () => {
    const s = current();
    if (
      reported !== undefined &&
      reported.generation === s.generation &&
      reported.ready === s.ready &&
      (s.ready || (!reported.ready && reported.error === s.error))
    )
      return;
    reported = s;
    o.onChange?.(s);
  };
  const ticker = setInterval(notify, 250);
  ticker.unref();
  return {
    current,
    reloads: tracker.counts,
    stalenessSeconds: () => watch.contactAgeMs() / 1000,
    synced: watch.synced,
    close: () => {
      clearInterval(ticker);
      watch.close();
    },
  };
}
