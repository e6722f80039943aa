/**
 * The parent's side of bench/double-child.ts: starts the API-server double in its own process and
 * calls it over IPC (get, put, remove, the fault schedule, the request log). The controller and the
 * projector's store under measurement stay in this process and reach the double over HTTP, as they
 * would reach kube-apiserver.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import type { Req } from './double-child.ts';

export type { Req };

export class RemoteDouble {
  private next = 0;
  private readonly pending = new Map<number, { ok: (v: unknown) => void; fail: (e: Error) => void }>();

  private constructor(
    private readonly child: ChildProcess,
    readonly port: number,
  ) {
    child.on('message', (m: { id: number; ok: boolean; value?: unknown; error?: string }) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.ok) p.ok(m.value);
      else p.fail(new Error(m.error));
    });
    child.on('exit', (code) => {
      for (const p of this.pending.values()) p.fail(new Error(`the double exited (${code})`));
      this.pending.clear();
    });
  }

  /** Forks the double (it seeds the cluster before it answers); resolves once it listens. */
  static start(): Promise<RemoteDouble> {
    const child = fork(fileURLToPath(new URL('./double-child.ts', import.meta.url)), process.argv.slice(2), {
      execArgv: ['--import', 'tsx', '--max-old-space-size=8192'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      // Structured clone: objects with undefined fields and nested arrays arrive as sent.
      serialization: 'advanced',
    });
    return new Promise((ok, fail) => {
      const onExit = (code: number | null) => fail(new Error(`the double exited before listening (${code})`));
      child.once('exit', onExit);
      child.once('message', (m: { ready?: boolean; port?: number }) => {
        child.off('exit', onExit);
        if (m.ready && m.port) ok(new RemoteDouble(child, m.port));
        else fail(new Error('unexpected first message from the double'));
      });
    });
  }

  private call<T>(op: string, ...args: unknown[]): Promise<T> {
    const id = this.next++;
    return new Promise<T>((ok, fail) => {
      this.pending.set(id, { ok: ok as (v: unknown) => void, fail });
      this.child.send({ id, op, args });
    });
  }

  /** A kubeconfig authenticating as `user` (a ServiceAccount's username). */
  async kubeConfig(user: string): Promise<k8s.KubeConfig> {
    const token = await this.call<string>('token', user);
    const kc = new k8s.KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'double', server: `http://127.0.0.1:${this.port}`, skipTLSVerify: true }],
      users: [{ name: 'bench', token }],
      contexts: [{ name: 'double', cluster: 'double', user: 'bench' }],
      currentContext: 'double',
    });
    return kc;
  }

  get<T = Record<string, any>>(apiVersion: string, kind: string, ns: string | undefined, name: string) {
    return this.call<T | undefined>('get', apiVersion, kind, ns, name);
  }
  /** Writes storage directly; resolves with when the change was made (epoch ms). */
  put(obj: object): Promise<number> {
    return this.call<number>('put', obj);
  }
  remove(apiVersion: string, kind: string, ns: string | undefined, name: string): Promise<number> {
    return this.call<number>('remove', apiVersion, kind, ns, name);
  }
  /** A fault schedule of bench/double-child.ts by name, or none. */
  setFault(name: string | undefined): Promise<void> {
    return this.call<void>('setFault', name);
  }
  /** When the last write (leases and heartbeats aside) arrived; 0 before any. */
  lastWriteAt(): Promise<number> {
    return this.call<number>('lastWriteAt');
  }
  /** The writes (leases aside) that arrived in [from, to). */
  writes(from: number, to: number): Promise<Req[]> {
    return this.call<Req[]>('writes', from, to);
  }

  async stop(): Promise<void> {
    const exited = new Promise<void>((r) => {
      if (this.child.exitCode !== null) r();
      else this.child.once('exit', () => r());
    });
    await this.call('stop').catch(() => undefined);
    this.child.disconnect();
    await exited;
  }
}
