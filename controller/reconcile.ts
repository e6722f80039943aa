/**
 * The pass: render from the cached cluster state, then write only what differs. Level-triggered and
 * incremental (render-stage.ts); it reads the informer caches, never lists, and skips an apply when
 * the live object has the desired hash and still holds every field the render sets (desired.ts).
 * Applies, deletes and status writes run `concurrency` at a time; each failure waits out its own
 * capped backoff with jitter, a new desired state is tried at once, and a failure is the condition of
 * the resource that owns the object only. Objects no longer rendered are pruned only while no
 * rendered object fails to apply; a failed delete holds back nothing but itself; MCP key mirrors whose
 * source became unusable are deleted on every pass (a revocation, not a prune). A mirror is read by
 * name when its live state is not known (after a resync, in a new term) and written only when it
 * differs, so a no-op resync writes nothing. With the registry
 * sync (registry-sync.ts) rooms and the registry ConfigMaps are its work, not the pass's. A write
 * refused by the leadership fence ends the pass.
 */
import { createLogger } from '../common/log.ts';
import { ItemBackoff } from './backoff.ts';
import {
  type ClusterState,
  type ClusterWriter,
  type PassStage,
  type ReconcileResult,
  type ReconcilerOptions,
  type RegistryHooks,
  SecretCache,
  selectPlatform,
} from './cluster.ts';
import {
  type ConditionInputs,
  conditionsFor,
  reportUnsupported,
  sameConditions,
  statusInputs,
  upstreamCondition,
} from './conditions.ts';
import { DESIRED_HASH, eachLimited, objKey, upToDate, withHash } from './desired.ts';
import { RENDERED_KINDS } from './kube/client.ts';
import { type MirrorResult, mirrorMcpKeys, reasonOf } from './kube/mcp-keys.ts';
import { RenderStage, stageClock, YIELD_EVERY, yieldToEvents } from './render-stage.ts';
import type {
  Conflict,
  K8sObject,
  OwnResource,
  PartnerClient,
  Resources,
  RetrievalAgent,
  RetrievalPlatform,
  RetrievalRoom,
} from './types.ts';
import { resourceKey } from './types.ts';
import { judgeUpstream, type UpstreamVerdict } from './upstream.ts';

export {
  type ClusterState,
  type ClusterWriter,
  PASS_STAGES,
  type PassStage,
  type ReconcileResult,
  type ReconcilerOptions,
  SecretCache,
  selectPlatform,
} from './cluster.ts';
export { sameConditions } from './conditions.ts';

import { applyFailures, deleteFailures, MIRROR_APPLY, ownFailures } from './failures.ts';

export { covers, DESIRED_HASH, desiredHash, eachLimited, upToDate, withHash } from './desired.ts';

const log = createLogger('controller');

/** A write refused by the leadership fence ends the pass: nothing more is written under it. */
const fenced = (e: unknown): boolean => (e as { fenced?: boolean })?.fenced === true;

/** One pass's bookkeeping, shared by its stages. */
interface PassContext {
  readonly state: ClusterState;
  readonly uids: Map<string, string>;
  readonly desiredKeys: Set<string>;
  applied: number;
  unchanged: number;
  pruned: number;
  newFailures: number;
}

/**
 * One controller's reconciler. It keeps what must outlive a pass: per-object backoff, the Secret
 * cache and the memos of the incremental mode. Nothing watches the MCP key mirrors, so it remembers
 * the hash of each mirror it applied or found up to date, but only until the next resync, which reads
 * every mirror again by name: a mirror deleted or edited behind the controller's back is written
 * again within the resync period, and a mirror that still holds what it should is not written.
 */
export class Reconciler {
  readonly backoff: ItemBackoff;
  readonly secrets: SecretCache;
  private readonly mirrors = new Map<string, string>();
  /** Stale mirrors this process deleted (or found absent): not deleted again until a resync. */
  private readonly goneMirrors = new Set<string>();
  /** Last error of each failing apply or delete (`apply <key>` / `delete <key>`). */
  private readonly failing = new Map<string, string>();
  /** Mirror key → the `namespace/name` of the RetrievalAgent whose key it carries. */
  private readonly mirrorWorkloads = new Map<string, string>();
  private readonly concurrency: number;
  private readonly now: () => Date;
  private readonly incremental: boolean;
  private readonly registry: RegistryHooks | undefined;
  /** What the last pass read of the JWKS Secret, for the registry's own renders between passes. */
  jwks: Pick<Resources, 'jwksInline' | 'jwksProblem'> = {};
  /** The render, its memos and the hashed objects (render-stage.ts). */
  private readonly stage: RenderStage;
  /** Backoff key → the desired hash that failed: a new desired state is tried at once. */
  private readonly failedHash = new Map<string, string>();
  /** Object key → the desired and live objects last found up to date (both by identity). */
  private readonly verified = new Map<string, { desired: K8sObject; live: K8sObject }>();
  /** Mirror key → its content and the same with its hash annotation (mirrors are built per pass). */
  private readonly mirrorHashes = new Map<string, { sig: string; hashed: K8sObject }>();
  /**
   * Resource (by identity: the caches replace an object on every change) → the inputs of its
   * conditions when its status last said exactly them, and the conditions' summary.
   */
  private statusMemo = new WeakMap<OwnResource, { sig: string; computed: ReconcileResult['conditions'] }>();

  constructor(
    private readonly api: ClusterWriter,
    o: ReconcilerOptions = {},
  ) {
    this.backoff = o.backoff ?? new ItemBackoff();
    this.secrets = new SecretCache(api);
    this.concurrency = o.concurrency ?? 8;
    this.now = o.now ?? (() => new Date());
    this.incremental = o.incremental ?? true;
    this.registry = o.registry;
    this.stage = new RenderStage(this.incremental, this.registry);
  }

  /**
   * Periodic resync: forgets every remembered Secret read (rotated MCP keys and JWKS are picked up),
   * every mirror's remembered state (each is read again and written only when it differs, so a mirror
   * deleted or edited by hand is restored) and every memo, so a full render, hash and comparison
   * happens.
   */
  resync(): void {
    this.secrets.forget();
    this.goneMirrors.clear();
    this.mirrors.clear();
    this.stage.reset();
    this.verified.clear();
    this.mirrorHashes.clear();
    this.statusMemo = new WeakMap();
  }

  async pass(state: ClusterState): Promise<ReconcileResult> {
    const clock = stageClock();
    const live = (r: OwnResource) => !r.metadata.deletionTimestamp;
    const input: Resources = {
      platforms: state.own<RetrievalPlatform>('RetrievalPlatform').filter(live),
      agents: state.own<RetrievalAgent>('RetrievalAgent').filter(live),
      // With the registry sync, rooms are its work alone (per room, not per pass).
      rooms: this.registry ? [] : state.own<RetrievalRoom>('RetrievalRoom').filter(live),
      partners: state.own<PartnerClient>('PartnerClient').filter(live),
    };
    const platform = selectPlatform(input.platforms);
    // An upstream the design does not hold on: render nothing new and prune nothing, so whatever works
    // keeps working, and say what was seen on the RetrievalPlatform.
    const verdict = judgeUpstream(await this.api.upstream());
    clock.lap('upstream');
    if (!verdict.supported) return this.unsupportedPass(state, input.platforms, verdict, clock.stages);
    await this.resolveJwks(platform, input);
    clock.lap('upstream');
    const { conflicts, objects, agentsRendered } = await this.stage.run(input);
    clock.lap('render');
    // The MCP routes' API keys, mirrored from each Agent's own MCP credential (fails closed when absent).
    const mirror = await mirrorMcpKeys(this.secrets, objects);
    clock.lap('mirror');
    const ctx: PassContext = {
      state,
      uids: new Map(),
      desiredKeys: new Set(objects.map(objKey)),
      applied: 0,
      unchanged: 0,
      pruned: 0,
      newFailures: 0,
    };
    for (const { secret } of mirror.secrets) ctx.desiredKeys.add(objKey(secret));
    this.forgetObsolete(state, ctx.desiredKeys, new Set(mirror.stale.map(objKey)));
    const todo = await this.compare(ctx, objects);
    clock.lap('compare');
    await eachLimited(todo, this.concurrency, (o) => this.applyOne(ctx, o));
    clock.lap('apply');
    await this.applyMirrors(ctx, mirror);
    clock.lap('mirror');
    await this.prune(ctx, mirror.stale);
    clock.lap('prune');
    const status = await this.writeStatus(ctx, input, platform, conflicts, mirror.problems, verdict);
    clock.lap('status');
    const errors = [...this.failing.values()].sort();
    const retryAt = this.backoff.nextDue();
    const counts = {
      applied: ctx.applied,
      unchanged: ctx.unchanged,
      pruned: ctx.pruned,
      statusWrites: status.writes,
    };
    log.info('reconciled', {
      ...counts,
      conflicts: conflicts.length,
      errors: errors.length + status.errors.length,
    });
    return {
      ...counts,
      conflicts,
      errors: [...errors, ...status.errors],
      conditions: status.computed,
      ...(retryAt !== undefined ? { retryAt } : {}),
      stages: clock.stages,
      agentsRendered,
    };
  }

  private async unsupportedPass(
    state: ClusterState,
    platforms: RetrievalPlatform[],
    verdict: UpstreamVerdict,
    stages: Record<PassStage, number>,
  ): Promise<ReconcileResult> {
    const statusWrites = await reportUnsupported(
      this.api,
      state.stored?.bind(state),
      platforms,
      verdict,
      this.now().toISOString(),
    );
    log.warn('unsupported upstream', { seen: verdict.seen, problems: verdict.problems.length });
    return {
      applied: 0,
      unchanged: 0,
      pruned: 0,
      statusWrites,
      conflicts: [],
      errors: [],
      conditions: [],
      unsupported: verdict,
      stages,
      agentsRendered: 0,
    };
  }

  /**
   * `jwt.jwksSecretRef`: the JWKS inlined into the public routes' policy. A Secret that cannot be
   * read (missing, or not granted: deploy/components/jwks-secret-reader) is said in the platform's
   * `JwksUnresolved` conflict, never a failed pass.
   */
  private async resolveJwks(platform: RetrievalPlatform | undefined, input: Resources): Promise<void> {
    this.jwks = {};
    const ref = platform?.spec.jwt?.jwksSecretRef;
    if (!platform || !ref) return;
    const ns = platform.spec.gateway?.namespace;
    const where = `Secret ${ns}/${ref.name}`;
    try {
      const v = await this.secrets.readSecretKey(ns, ref.name, ref.key);
      if (v) input.jwksInline = v;
      else input.jwksProblem = `${where} key ${ref.key} is missing or empty`;
    } catch (e) {
      input.jwksProblem = `cannot read ${where}: ${reasonOf(e)} (the jwks-secret-reader component grants it)`;
    }
    this.jwks = {
      ...(input.jwksInline !== undefined ? { jwksInline: input.jwksInline } : {}),
      ...(input.jwksProblem !== undefined ? { jwksProblem: input.jwksProblem } : {}),
    };
  }

  /**
   * Failures of objects no longer desired (apply) or no longer to delete are forgotten, so they
   * cannot hold pruning back forever.
   */
  private forgetObsolete(state: ClusterState, desiredKeys: Set<string>, staleKeys: Set<string>): void {
    for (const k of this.backoff.keys()) {
      const op = k.slice(0, k.indexOf(' '));
      if (op === 'status') continue; // a status write's backoff lasts until it succeeds
      const key = k.slice(k.indexOf(' ') + 1);
      const [apiVersion, kind, namespace, name] = key.split('|') as [string, string, string, string];
      const gone =
        op === 'apply'
          ? !desiredKeys.has(key)
          : desiredKeys.has(key) ||
            (kind === 'Secret' ? !staleKeys.has(key) : !state.live(apiVersion, kind, namespace || undefined, name));
      if (gone) this.forget(k);
    }
  }

  /** The desired objects whose live copy is not already what they would write. */
  private async compare(ctx: PassContext, objects: K8sObject[]): Promise<K8sObject[]> {
    const todo: K8sObject[] = [];
    let n = 0;
    for (const o of objects) {
      if (++n % YIELD_EVERY === 0) await yieldToEvents();
      const key = objKey(o);
      const current = ctx.state.live(o.apiVersion, o.kind, o.metadata.namespace, o.metadata.name);
      const seen = this.verified.get(key);
      // The caches replace an object on every change, so the same two objects compare the same.
      const same = seen !== undefined && seen.desired === o && seen.live === current;
      let failing = this.backoff.size > 0 && this.backoff.failuresOf(`apply ${key}`) > 0;
      if (failing && this.failedHash.get(`apply ${key}`) !== o.metadata.annotations?.[DESIRED_HASH]) {
        // A new desired state: tried now, not after the backoff of the state it replaces.
        this.forget(`apply ${key}`);
        failing = false;
        todo.push(o);
        continue;
      }
      if (!failing && (same || upToDate(current, o))) {
        if (this.incremental && current && !same) this.verified.set(key, { desired: o, live: current });
        if (current?.metadata.uid) ctx.uids.set(key, current.metadata.uid);
        ctx.unchanged++;
      } else {
        this.verified.delete(key);
        todo.push(o);
      }
    }
    if (this.verified.size > objects.length) {
      // Objects no longer rendered: forget them, so the map stays the size of the render.
      const keys = new Set(objects.map(objKey));
      for (const k of this.verified.keys()) if (!keys.has(k)) this.verified.delete(k);
    }
    return todo;
  }

  private failed(ctx: PassContext, k: string, what: string, e: unknown, hash?: string): void {
    if (fenced(e)) throw e;
    if (hash !== undefined) this.failedHash.set(k, hash);
    this.backoff.fail(k, this.now().getTime());
    if (this.backoff.failuresOf(k) === 1) ctx.newFailures++;
    // The API server's message names the object and the cause; it carries no object content.
    this.failing.set(k, `${what}: ${(e as Error).message}`.slice(0, 1024));
  }

  private async applyOne(ctx: PassContext, o: K8sObject, remember?: string): Promise<void> {
    const key = objKey(o);
    const k = `apply ${key}`;
    if (this.backoff.waiting(k, this.now().getTime())) return; // still failing: its last error stays reported
    try {
      const stored = await this.api.apply(o);
      if (stored?.metadata?.uid) ctx.uids.set(key, stored.metadata.uid);
      if (stored?.metadata) ctx.state.stored?.({ ...stored, apiVersion: o.apiVersion, kind: o.kind });
      if (remember) {
        this.mirrors.set(key, remember);
        this.goneMirrors.delete(key);
      }
      this.forget(k);
      ctx.applied++;
    } catch (e) {
      this.failed(
        ctx,
        k,
        `apply ${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}`,
        e,
        o.metadata.annotations?.[DESIRED_HASH],
      );
    }
  }

  /**
   * Each mirrored key is owned by its Agent's MCP policy, applied above: the garbage collector then
   * removes the key with the policy, so the controller never needs to list Secrets. A mirror whose
   * state this reconciler does not know (after a resync or in a new term) is read by name and applied
   * only when it lacks what the controller owns in it (data, type, labels, owner reference, hash).
   *
   * Why a GET per mirror, not a cache: the Role in the gateway namespace names the mirrors
   * (`resourceNames`), and kube-apiserver authorizes a LIST or WATCH against resourceNames only when
   * a field selector `metadata.name=<name>` narrows it to one object. A cache would then be one
   * watch held open per mirror (1,000 at 1,000 agents), or list/watch on every Secret of the gateway
   * namespace (its TLS and bridge keys). Reads by name once per resync period cost the same number of
   * requests as the applies they replace, and write nothing.
   */
  private async applyMirrors(ctx: PassContext, mirror: MirrorResult): Promise<void> {
    const todo: { secret: K8sObject; hash: string; read: boolean }[] = [];
    for (const { secret, ownerPolicy, workload } of mirror.secrets) {
      const policyKey = `agentgateway.dev/v1alpha1|AgentgatewayPolicy|${secret.metadata.namespace}|${ownerPolicy}`;
      const uid = ctx.uids.get(policyKey);
      if (!uid) continue; // its policy failed to apply; that error is already recorded
      secret.metadata.ownerReferences = [
        { apiVersion: 'agentgateway.dev/v1alpha1', kind: 'AgentgatewayPolicy', name: ownerPolicy, uid },
      ];
      const mkey = objKey(secret);
      this.mirrorWorkloads.set(mkey, workload);
      const sig = JSON.stringify([secret.metadata, (secret as { data?: unknown }).data]);
      const memoed = this.incremental ? this.mirrorHashes.get(mkey) : undefined;
      const hashed = memoed?.sig === sig ? memoed.hashed : withHash(secret);
      if (this.incremental) this.mirrorHashes.set(mkey, { sig, hashed });
      ctx.desiredKeys.add(mkey);
      const hash = hashed.metadata.annotations?.[DESIRED_HASH] as string;
      const known = this.mirrors.get(mkey);
      const failing = this.backoff.failuresOf(`apply ${mkey}`) > 0;
      if (known === hash && !failing) ctx.unchanged++;
      // Known to hold something else (a new key) or failing: applied without reading it first.
      else todo.push({ secret: hashed, hash, read: known === undefined && !failing });
    }
    await eachLimited(todo, this.concurrency, async ({ secret, hash, read }) => {
      if (read && upToDate(await this.readMirror(secret), secret)) {
        this.mirrors.set(objKey(secret), hash);
        this.goneMirrors.delete(objKey(secret));
        ctx.unchanged++;
        return;
      }
      await this.applyOne(ctx, secret, hash);
    });
  }

  /**
   * The live mirror, or undefined when absent or unreadable (a name the Role does not grant): the
   * apply that follows then writes it, or reports why it cannot.
   */
  private async readMirror(o: K8sObject): Promise<K8sObject | undefined> {
    try {
      return await this.api.readMirror(o.metadata.namespace as string, o.metadata.name);
    } catch {
      return undefined;
    }
  }

  /** True when a mirror is known not to exist (read as absent); false when present or unreadable. */
  private async mirrorAbsent(o: K8sObject): Promise<boolean> {
    try {
      return (await this.api.readMirror(o.metadata.namespace as string, o.metadata.name)) === undefined;
    } catch {
      return false;
    }
  }

  /** Failing applies of rendered objects (not mirrors, which fail for their RetrievalAgent alone). */
  /**
   * Deletes the mirrors whose source became unusable (always), and the rendered objects no longer
   * desired (only while no rendered object fails to apply). Each delete stands alone: one that fails
   * is retried on its own backoff and reported on the platform, and the others go on.
   */
  private async prune(ctx: PassContext, stale: readonly K8sObject[]): Promise<void> {
    const doomed: K8sObject[] = [];
    // A key whose source is unusable must stop working now, not when its policy goes. Mirrors
    // cannot be listed, so one is deleted by name unless this process already saw it gone; one this
    // reconciler did not write (after a resync, in a new term) is read first, and not deleted when
    // it does not exist.
    await eachLimited(
      stale.filter((s) => !this.goneMirrors.has(objKey(s))),
      this.concurrency,
      async (s) => {
        const key = objKey(s);
        if (!this.mirrors.has(key) && !this.backoff.failuresOf(`delete ${key}`) && (await this.mirrorAbsent(s)))
          this.goneMirrors.add(key);
        else doomed.push(s);
      },
    );
    if (applyFailures(this.failing).length === 0)
      for (const k of RENDERED_KINDS) {
        const existing = ctx.state.rendered(k.apiVersion, k.kind);
        if (!existing) continue; // not cached (kind not served or not synced): prune nothing of it
        for (const o of existing) {
          if (this.registry?.owns({ kind: k.kind, metadata: o.metadata })) continue; // registry-sync.ts
          const key = `${k.apiVersion}|${k.kind}|${o.metadata.namespace ?? ''}|${o.metadata.name}`;
          if (!ctx.desiredKeys.has(key)) doomed.push({ ...o, apiVersion: k.apiVersion, kind: k.kind });
        }
      }
    const now = this.now().getTime();
    await eachLimited(doomed, this.concurrency, async (o) => {
      const key = objKey(o);
      if (this.backoff.waiting(`delete ${key}`, now)) return;
      try {
        if (await this.api.delete(o)) ctx.pruned++;
        if (o.kind === 'Secret') {
          this.mirrors.delete(key);
          this.goneMirrors.add(key);
        }
        ctx.state.removed?.(o);
        this.forget(`delete ${key}`);
      } catch (e) {
        this.failed(ctx, `delete ${key}`, `delete ${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}`, e);
      }
    });
  }

  /** The problem of one RetrievalAgent's MCP key: unreadable or malformed source, or a failed write. */
  private agentProblem(res: OwnResource, problems: ReadonlyMap<string, string>): string | undefined {
    if (res.kind !== 'RetrievalAgent') return undefined;
    const workload = `${res.metadata.namespace}/${res.metadata.name}`;
    const p = problems.get(workload);
    if (p) return p;
    for (const [k, v] of this.failing)
      if (k.startsWith(MIRROR_APPLY) && this.mirrorWorkloads.get(k.slice('apply '.length)) === workload) return v;
    return undefined;
  }

  private async writeStatus(
    ctx: PassContext,
    input: Resources,
    platform: RetrievalPlatform | undefined,
    conflicts: Conflict[],
    problems: ReadonlyMap<string, string>,
    verdict: UpstreamVerdict,
  ): Promise<{ writes: number; errors: string[]; computed: ReconcileResult['conditions'] }> {
    // Each resource reports the failures of its own objects only (a RetrievalAgent: its objects; the
    // platform: the shared ones and failed deletes), in a stable order, so a retry that fails the same
    // way writes no status and one failing object never rewrites every resource's status.
    const own = ownFailures(this.failing, this.stage.owners);
    const pruneErrors = deleteFailures(this.failing);
    const verdictSig = JSON.stringify([verdict.supported, verdict.seen, verdict.problems]);
    const byKey = new Map(conflicts.map((c) => [resourceKey({ kind: c.kind, metadata: c }), c]));
    const stamp = this.now().toISOString();
    const computed: ReconcileResult['conditions'] = [];
    const todo: {
      res: OwnResource;
      conditions: ReturnType<typeof conditionsFor>;
      inputs: ConditionInputs;
    }[] = [];
    for (const res of [...input.platforms, ...input.agents, ...input.rooms, ...input.partners] as OwnResource[]) {
      const { inputs, sig } = statusInputs(res, {
        own,
        pruneErrors,
        conflicts: byKey,
        platform,
        problem: this.agentProblem(res, problems),
        verdictSig,
        memoized: this.incremental,
      });
      const memo = this.incremental ? this.statusMemo.get(res) : undefined;
      if (memo !== undefined && memo.sig === sig) {
        this.backoff.forget(`status ${resourceKey(res)}`);
        computed.push(...memo.computed);
        continue;
      }
      const conditions = conditionsFor(res, inputs, stamp);
      if (res.kind === 'RetrievalPlatform') conditions.push(upstreamCondition(res, verdict, stamp));
      const summary = conditions.map((c) => ({
        kind: res.kind,
        type: c.type,
        status: c.status,
        reason: c.reason,
      }));
      computed.push(...summary);
      if (
        sameConditions(res.status?.conditions, conditions) &&
        res.status?.observedGeneration === res.metadata.generation
      ) {
        // Nothing to write: a failed write of an earlier status is moot.
        this.backoff.forget(`status ${resourceKey(res)}`);
        if (this.incremental) this.statusMemo.set(res, { sig, computed: summary });
        continue;
      }
      // A status write that failed waits out its own backoff, like any write.
      if (this.backoff.waiting(`status ${resourceKey(res)}`, this.now().getTime())) continue;
      todo.push({ res, conditions, inputs });
    }
    const out = { writes: 0, errors: [] as string[], computed };
    await eachLimited(todo, this.concurrency, async (t) => {
      const error = await this.patchOne(ctx, t.res, t.conditions, t.inputs);
      const k = `status ${resourceKey(t.res)}`;
      if (error === undefined) {
        out.writes++;
        this.backoff.forget(k);
      } else {
        this.backoff.fail(k, this.now().getTime());
        out.errors.push(`status ${t.res.kind} ${t.res.metadata.name}: ${error}`);
      }
    });
    // One Warning per pass in which an object started failing (not one per retry).
    const first = [...this.failing.values()].sort()[0];
    if (ctx.newFailures > 0 && platform && first)
      await this.api.event(platform, 'Warning', 'ApplyFailed', first).catch(() => undefined);
    return out;
  }

  /** Writes one resource's status and the Events its change calls for; the error when it failed. */
  private async patchOne(
    ctx: PassContext,
    res: OwnResource,
    conditions: ReturnType<typeof conditionsFor>,
    { conflict, problem }: ConditionInputs,
  ): Promise<string | undefined> {
    const wasConflict = res.status?.conditions?.find((c) => c.type === 'Conflict')?.status === 'True';
    const hadProblem = res.status?.conditions?.find((c) => c.type === 'Degraded')?.reason === 'McpKeyUnavailable';
    try {
      const stored = await this.api.patchStatus(res, {
        ...(res.metadata.generation !== undefined ? { observedGeneration: res.metadata.generation } : {}),
        conditions,
      });
      if (stored?.metadata) ctx.state.stored?.({ ...stored, apiVersion: res.apiVersion, kind: res.kind });
      if (conflict && !wasConflict) await this.api.event(res, 'Warning', conflict.reason, conflict.message);
      if (!conflict && wasConflict)
        await this.api.event(res, 'Normal', 'ConflictResolved', 'the resource renders again');
      if (problem && !hadProblem) await this.api.event(res, 'Warning', 'McpKeyUnavailable', problem);
      return undefined;
    } catch (e) {
      if (fenced(e)) throw e;
      return (e as Error).message;
    }
  }

  private forget(k: string): void {
    this.backoff.forget(k);
    this.failing.delete(k);
    this.failedHash.delete(k);
  }
}
