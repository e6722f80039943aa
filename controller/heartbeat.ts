/**
 * The controller's heartbeat (projector/heartbeat.ts has the format and the projector's rule): while
 * this replica leads and is healthy, it rewrites one small ConfigMap every `periodMs` (5 s by
 * default), at the urgent priority and under the leadership fence like every write. It stops the
 * moment the term ends (the fence refuses the write) or the controller stops being healthy: its own
 * resources not listed, or a registry write failing for longer than `stuckAfterMs`, so that a
 * controller that can no longer make revocations reach the projector makes it fail closed.
 *
 * Cost: one object of about 500 bytes per period; at 5 s that is 60 writes and about 30 KB of etcd
 * history per 5-minute compaction window.
 */
import { createLogger } from '../common/log.ts';
import { HEARTBEAT_CONFIGMAP, HEARTBEAT_KEY, heartbeatText } from '../projector/heartbeat.ts';
import type { WriteOptions } from './kube/client.ts';
import { PROJECTOR_CONFIG_LABEL, type RegistryContext } from './render/registry.ts';
import type { K8sObject } from './types.ts';
import { URGENT } from './workqueue.ts';

const log = createLogger('controller');

export const HEARTBEAT_PERIOD_MS = 5_000;

export interface HeartbeatOptions {
  writer: { apply(obj: K8sObject, o?: WriteOptions): Promise<K8sObject> };
  identity: string;
  periodMs?: number;
  /** Where and under which owner to write it (the registry's context), undefined without a platform. */
  context: () => Pick<RegistryContext, 'namespace' | 'ownerReferences'> | undefined;
  /** Leader with a valid term, caches listed, no registry write stuck. */
  healthy: () => boolean;
  now?: () => number;
  onWrite?: (ok: boolean) => void;
}

export function heartbeatObject(
  ctx: Pick<RegistryContext, 'namespace' | 'ownerReferences'>,
  identity: string,
  timeMs: number,
  periodMs: number,
): K8sObject {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: HEARTBEAT_CONFIGMAP,
      namespace: ctx.namespace,
      // The projector's label (it watches this) but not the rendered one: the pass never prunes it.
      labels: { [PROJECTOR_CONFIG_LABEL]: 'true' },
      ...(ctx.ownerReferences ? { ownerReferences: ctx.ownerReferences } : {}),
    },
    data: {
      [HEARTBEAT_KEY]: heartbeatText({
        holder: identity,
        timeMs,
        periodSeconds: Math.max(1, Math.round(periodMs / 1000)),
      }),
    },
  } as K8sObject;
}

export function startHeartbeat(o: HeartbeatOptions): { stop(): void; beat(): Promise<void> } {
  const period = o.periodMs ?? HEARTBEAT_PERIOD_MS;
  const now = o.now ?? Date.now;
  let busy = false;
  const beat = async () => {
    const ctx = o.context();
    if (busy || !ctx || !o.healthy()) return;
    busy = true;
    try {
      await o.writer.apply(heartbeatObject(ctx, o.identity, now(), period), { priority: URGENT });
      o.onWrite?.(true);
    } catch (e) {
      o.onWrite?.(false);
      if (!(e as { fenced?: boolean }).fenced)
        log.warn('heartbeat write failed', { error: (e as Error).message.slice(0, 200) });
    } finally {
      busy = false;
    }
  };
  const timer = setInterval(() => void beat(), period);
  timer.unref?.();
  return { stop: () => clearInterval(timer), beat };
}
