/** Leader election on a coordination.k8s.io/v1 Lease (optimistic concurrency through resourceVersion). */
import type * as k8s from '@kubernetes/client-node';
import { isNotFound } from './client.ts';

export interface LeaseOptions {
  name: string;
  namespace: string;
  identity: string;
  leaseDurationSeconds: number;
}

export class LeaderElector {
  constructor(
    private api: k8s.CoordinationV1Api,
    private o: LeaseOptions,
  ) {}

  /** One election round: returns whether this process holds the lease afterwards. */
  async tryAcquireOrRenew(now = new Date()): Promise<boolean> {
    const { name, namespace, identity, leaseDurationSeconds } = this.o;
    const spec = (acquire: boolean, prev?: k8s.V1LeaseSpec): k8s.V1LeaseSpec => ({
      holderIdentity: identity,
      leaseDurationSeconds,
      acquireTime: acquire ? now : (prev?.acquireTime ?? now),
      renewTime: now,
      leaseTransitions: (prev?.leaseTransitions ?? 0) + (acquire && prev ? 1 : 0),
    });
    let lease: k8s.V1Lease;
    try {
      lease = await this.api.readNamespacedLease({ name, namespace });
    } catch (e) {
      if (!isNotFound(e)) throw e;
      try {
        await this.api.createNamespacedLease({
          namespace,
          body: { metadata: { name, namespace }, spec: spec(true) },
        });
        return true;
      } catch (err) {
        if ((err as { code?: number }).code === 409) return false;
        throw err;
      }
    }
    const s = lease.spec ?? {};
    const renew = s.renewTime ? new Date(s.renewTime).getTime() : 0;
    const expired = renew + (s.leaseDurationSeconds ?? leaseDurationSeconds) * 1000 < now.getTime();
    const mine = s.holderIdentity === identity;
    if (!mine && !expired && s.holderIdentity) return false;
    try {
      await this.api.replaceNamespacedLease({
        name,
        namespace,
        body: { metadata: { ...lease.metadata, name, namespace }, spec: spec(!mine, s) },
      });
      return true;
    } catch (e) {
      if ((e as { code?: number }).code === 409) return false;
      throw e;
    }
  }
}
