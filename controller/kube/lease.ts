/**
 * Leader election on a coordination.k8s.io/v1 Lease, as client-go's `tools/leaderelection` does it:
 * optimistic concurrency through resourceVersion, and another holder's lease counted as expired only
 * `leaseDurationSeconds` after this replica *observed* its record change (its own clock, so clock
 * skew between nodes does not matter). Requests go straight to the API with a deadline, outside the
 * write limiter, so a flood of other writes can never starve the renewal.
 */
import type * as k8s from '@kubernetes/client-node';
import { ApiError, requestJson } from '../../common/kube-request.ts';

export interface LeaseOptions {
  name: string;
  namespace: string;
  identity: string;
  leaseDurationSeconds: number;
  /** Deadline of one Lease request (default 5 s). */
  requestTimeoutMs?: number;
}

interface LeaseObject {
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

export class LeaderElector {
  /** The last record seen and when this replica saw it change. */
  private observed: { record: string; at: number } | undefined;

  constructor(
    private readonly kc: k8s.KubeConfig,
    private readonly o: LeaseOptions,
  ) {}

  private path(name?: string): string {
    const base = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.o.namespace)}/leases`;
    return name ? `${base}/${encodeURIComponent(name)}` : base;
  }

  private req<T>(method: 'GET' | 'POST' | 'PUT', body?: unknown): Promise<T> {
    return requestJson<T>(
      this.kc,
      {
        method,
        path: method === 'POST' ? this.path() : this.path(this.o.name),
        ...(body !== undefined ? { body } : {}),
        timeoutMs: this.o.requestTimeoutMs ?? 5000,
      },
      { maxRetries: 0 },
    );
  }

  /** One election round: returns whether this process holds the lease afterwards. */
  async tryAcquireOrRenew(now = new Date()): Promise<boolean> {
    const { name, namespace, identity, leaseDurationSeconds } = this.o;
    const t = now.toISOString();
    const spec = (acquire: boolean, prev?: LeaseObject['spec']): LeaseObject['spec'] => ({
      holderIdentity: identity,
      leaseDurationSeconds,
      acquireTime: acquire ? t : (prev?.acquireTime ?? t),
      renewTime: t,
      leaseTransitions: (prev?.leaseTransitions ?? 0) + (acquire && prev ? 1 : 0),
    });
    let lease: LeaseObject;
    try {
      lease = await this.req<LeaseObject>('GET');
    } catch (e) {
      if (!(e instanceof ApiError && e.code === 404)) throw e;
      try {
        await this.req('POST', {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name, namespace },
          spec: spec(true),
        });
        return true;
      } catch (err) {
        if (err instanceof ApiError && err.code === 409) return false;
        throw err;
      }
    }
    const s = lease.spec ?? {};
    const record = JSON.stringify(s);
    if (this.observed?.record !== record) this.observed = { record, at: now.getTime() };
    const mine = s.holderIdentity === identity;
    const expired = this.observed.at + (s.leaseDurationSeconds ?? leaseDurationSeconds) * 1000 <= now.getTime();
    if (!mine && !expired && s.holderIdentity) return false;
    try {
      const next = spec(!mine, s);
      await this.req('PUT', {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { ...lease.metadata, name, namespace },
        spec: next,
      });
      this.observed = { record: JSON.stringify(next), at: now.getTime() };
      return true;
    } catch (e) {
      if (e instanceof ApiError && e.code === 409) return false;
      throw e;
    }
  }

  /**
   * `ReleaseOnCancel`: a holder that stops hands the lease back (empty holder, 1 s duration), so a
   * standby replica takes over at its next retry instead of waiting out the lease.
   */
  async release(now = new Date()): Promise<void> {
    const lease = await this.req<LeaseObject>('GET');
    if (lease.spec?.holderIdentity !== this.o.identity) return;
    const t = now.toISOString();
    await this.req('PUT', {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: lease.metadata,
      spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: t, acquireTime: t },
    });
  }
}
