/**
 * The reconciler: render everything from the cached cluster state, then write only what differs.
 *
 * Level-triggered: every pass computes every desired object from our four kinds, but the render is
 * incremental (render/incremental.ts: an Agent's objects are rendered again only when their inputs
 * changed, and an unchanged object is the same object as in the previous pass), so hashes and
 * comparisons with the live caches are remembered by identity; a resync drops every memo. A pass
 * reads the informer caches instead of listing, and writes an object only when the live copy is not
 * already what it would write:
 *
 * - each desired object carries `retrieval.fgentic.dev/desired-hash` (SHA-256 of its JSON without
 *   that annotation). The apply is skipped when the live object has the same hash and still
 *   holds every field and value the desired object sets (so an edit by someone else is re-applied);
 * - status is patched only when the conditions (ignoring lastTransitionTime) or observedGeneration
 *   differ from what the resource already says;
 * - applies and deletes run at most `concurrency` at a time; a failed object waits out a per-object
 *   capped exponential backoff with jitter (`backoff.ts`) while the others go on, and the pass reports
 *   when the next retry is due;
 * - objects no longer rendered are pruned only when no object is failing, so a transient failure
 *   never removes a working route.
 */
import { createHash } from 'node:crypto';
import { createLogger } from '../common/log.ts';
import { ItemBackoff } from './backoff.ts';
import { RENDERED_KINDS } from './kube/client.ts';
import { mirrorMcpKeys, type SecretReader } from './kube/mcp-keys.ts';
import { type RenderMemo, renderIncremental } from './render/incremental.ts';
import { render } from './render/index.ts';
import type {
  Condition,
  Conflict,
  K8sObject,
  OwnKind,
  OwnResource,
  PartnerClient,
  Resources,
  RetrievalAgent,
  RetrievalPlatform,
  RetrievalRoom,
} from './types.ts';
import { resourceKey } from './types.ts';
import { judgeUpstream, type UpstreamFacts, type UpstreamVerdict } from './upstream.ts';

const log = createLogger('controller');

/** Annotation on every applied object: the hash of what the controller last wanted it to be. */
export const DESIRED_HASH = 'retrieval.fgentic.dev/desired-hash';

/** The writes (and the few reads no cache holds) a pass makes; KubeClient implements it. */
export interface ClusterWriter {
  /** Server-side apply; resolves to the object as stored (its uid names it in owner references). */
  apply(obj: K8sObject): Promise<K8sObject>;
  /** Deletes; resolves to false when the object did not exist. */
  delete(obj: K8sObject): Promise<boolean>;
  /** Merge-patches status; resolves to the stored object when the API returns it. */
  patchStatus(res: OwnResource, status: Record<string, unknown>): Promise<K8sObject | undefined>;
  event(res: OwnResource, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void>;
  readSecretKey(namespace: string, name: string, key: string): Promise<string | undefined>;
  /** The kagent and agentgateway APIs the cluster serves. */
  upstream(): Promise<UpstreamFacts>;
}

/**
 * What a pass reads: our four kinds and the live rendered objects (label-selected), from caches.
 * Objects are never changed in place: a change is a new object, as the informer caches store every
 * watch event and write-through. The reconciler's memos recognise unchanged objects by identity.
 */
export interface ClusterState {
  own<T extends OwnResource>(kind: OwnKind): T[];
  /** Live rendered objects of one kind, or undefined when that kind's cache is not synced. */
  rendered(apiVersion: string, kind: string): K8sObject[] | undefined;
  /** One live rendered object (undefined when absent or not cached). */
  live(apiVersion: string, kind: string, namespace: string | undefined, name: string): K8sObject | undefined;
  /** Write-through after a successful write, so the next pass sees it before the watch event. */
  stored?(obj: K8sObject): void;
  removed?(obj: K8sObject): void;
}

export interface ReconcileResult {
  /** Objects written by server-side apply in this pass. */
  applied: number;
  /** Desired objects whose live copy already matched (no request made). */
  unchanged: number;
  pruned: number;
  /** Status subresource patches written. */
  statusWrites: number;
  conflicts: Conflict[];
  errors: string[];
  /** Set when the upstream is unsupported: nothing was applied or pruned. */
  unsupported?: UpstreamVerdict;
  /** The conditions this pass computed for every resource (what their status says once written). */
  conditions: { kind: OwnResource['kind']; type: string; status: Condition['status']; reason: string }[];
  /** Epoch ms when the earliest failed object may be retried; undefined when nothing is failing. */
  retryAt?: number;
  /** Wall time of each stage of the pass, in ms (`PASS_STAGES`). */
  stages: Record<PassStage, number>;
  /** Retrieval Agents whose objects were rendered in this pass (all of them without `incremental`). */
  agentsRendered: number;
}

/** The stages of a pass, in order, as `ReconcileResult.stages` and the stage metric name them. */
export const PASS_STAGES = ['upstream', 'render', 'compare', 'apply', 'mirror', 'prune', 'status'] as const;
export type PassStage = (typeof PASS_STAGES)[number];

export interface ReconcilerOptions {
  /** Applies and deletes in flight at once (default 8). */
  concurrency?: number;
  now?: () => Date;
  backoff?: ItemBackoff;
  /**
   * Render only what the changed resources affect and remember hashes and comparisons of unchanged
   * objects (default true). False renders, hashes and compares everything on every pass: kept so the
   * benchmark can run both side by side.
   */
  incremental?: boolean;
}

const objKey = (o: { apiVersion: string; kind: string; metadata: { namespace?: string; name: string } }) =>
  `${o.apiVersion}|${o.kind}|${o.metadata.namespace ?? ''}|${o.metadata.name}`;

/**
 * The RetrievalPlatform every step uses: the one live platform named `default`, if it is the only
 * one so named. The render applies the same rule (render/conflicts.ts) and refuses anything else, so
 * the JWKS read, Events and the render can never look at different platforms.
 */
export function selectPlatform(platforms: RetrievalPlatform[]): RetrievalPlatform | undefined {
  const named = platforms.filter((p) => p.metadata.name === 'default' && !p.metadata.deletionTimestamp);
  return named.length === 1 ? named[0] : undefined;
}

/**
 * SHA-256 (hex) of the object's JSON, without the hash annotation itself. The render builds every
 * object in a fixed key order, so plain JSON is stable and costs a fraction of RFC 8785
 * canonicalisation at 12,000 objects per pass; a key order that did change would cost one apply.
 */
export function desiredHash(o: K8sObject): string {
  const annotations = { ...(o.metadata.annotations ?? {}) };
  delete annotations[DESIRED_HASH];
  const bare = { ...o, metadata: { ...o.metadata, annotations } };
  return createHash('sha256').update(JSON.stringify(bare)).digest('hex');
}

/** The object as it is applied: the desired object with its hash annotation. */
export function withHash(o: K8sObject): K8sObject {
  const hash = desiredHash(o);
  return {
    ...o,
    metadata: { ...o.metadata, annotations: { ...(o.metadata.annotations ?? {}), [DESIRED_HASH]: hash } },
  };
}

/**
 * True when `live` holds every field and value `want` sets (lists must match element by element).
 * Fields the API server adds (defaults, status, other managers' fields) are ignored.
 */
export function covers(live: unknown, want: unknown): boolean {
  if (want === null || typeof want !== 'object') return live === want;
  if (Array.isArray(want)) {
    if (!Array.isArray(live) || live.length !== want.length) return false;
    return want.every((w, i) => covers(live[i], w));
  }
  if (live === null || typeof live !== 'object' || Array.isArray(live)) return false;
  const l = live as Record<string, unknown>;
  for (const [k, v] of Object.entries(want as Record<string, unknown>)) {
    if (v === undefined) continue;
    if (!(k in l) || !covers(l[k], v)) return false;
  }
  return true;
}

/** True when the live object already is what `desired` (with its hash annotation) would make it. */
export function upToDate(live: K8sObject | undefined, desired: K8sObject): boolean {
  if (!live || live.metadata.deletionTimestamp) return false;
  const want = desired.metadata.annotations?.[DESIRED_HASH];
  if (!want || live.metadata.annotations?.[DESIRED_HASH] !== want) return false;
  const { metadata, ...body } = desired;
  return (
    covers(live.metadata.labels ?? {}, metadata.labels ?? {}) &&
    covers(live.metadata.annotations ?? {}, metadata.annotations ?? {}) &&
    covers(live.metadata.ownerReferences ?? [], metadata.ownerReferences ?? []) &&
    covers(live, body)
  );
}

/** Runs `fn` over `items` with at most `limit` in flight; never rejects (fn handles its errors). */
export async function eachLimited<T>(
  items: T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
}

function conditionsFor(
  res: OwnResource,
  conflict: Conflict | undefined,
  errors: string[],
  now: string,
  problem?: string,
): Condition[] {
  const gen = res.metadata.generation;
  const g = gen !== undefined ? { observedGeneration: gen } : {};
  const prev = new Map((res.status?.conditions ?? []).map((c) => [c.type, c]));
  const mk = (type: string, status: Condition['status'], reason: string, message: string): Condition => {
    const p = prev.get(type);
    return {
      type,
      status,
      reason,
      message,
      ...g,
      lastTransitionTime: p && p.status === status && p.lastTransitionTime ? p.lastTransitionTime : now,
    };
  };
  const degraded = errors.length > 0;
  return [
    conflict
      ? mk('Ready', 'False', 'Conflict', conflict.message)
      : degraded
        ? mk('Ready', 'False', 'ApplyFailed', `${errors.length} object(s) failed to apply`)
        : problem
          ? mk('Ready', 'False', 'McpKeyUnavailable', problem)
          : mk('Ready', 'True', 'Rendered', 'all rendered objects are applied'),
    conflict
      ? mk('Conflict', 'True', conflict.reason, conflict.message)
      : mk('Conflict', 'False', 'NoConflict', 'no conflicting resource'),
    degraded
      ? mk('Degraded', 'True', 'ApplyFailed', errors[0]?.slice(0, 1024) ?? '')
      : problem
        ? mk('Degraded', 'True', 'McpKeyUnavailable', problem)
        : mk('Degraded', 'False', 'Applied', 'every apply succeeded'),
  ];
}

/** Equal conditions, ignoring lastTransitionTime (which only moves when status moves). */
export function sameConditions(a: Condition[] | undefined, b: Condition[]): boolean {
  const strip = (c: Condition[]) =>
    c.map(({ type, status, reason, message, observedGeneration }) => ({
      type,
      status,
      reason,
      message,
      observedGeneration,
    }));
  return JSON.stringify(strip(a ?? [])) === JSON.stringify(strip(b));
}

/** Reads of Secrets, remembered until `forget` (a changed RetrievalAgent or platform, or a full resync). */
export class SecretCache implements SecretReader {
  private readonly values = new Map<string, string | undefined>();
  reads = 0;
  constructor(private readonly api: SecretReader) {}

  async readSecretKey(namespace: string, name: string, key: string): Promise<string | undefined> {
    const k = `${namespace}/${name}/${key}`;
    if (this.values.has(k)) return this.values.get(k);
    this.reads++;
    const v = await this.api.readSecretKey(namespace, name, key);
    // A missing key is read again next pass: it may be created any moment and nothing watches it.
    if (v !== undefined) this.values.set(k, v);
    return v;
  }

  forget(namespace?: string, name?: string): void {
    if (namespace === undefined) {
      this.values.clear();
      return;
    }
    for (const k of [...this.values.keys()])
      if (k.startsWith(`${namespace}/${name === undefined ? '' : `${name}/`}`)) this.values.delete(k);
  }
}

/**
 * One controller's reconciler. It keeps what must outlive a pass: per-object backoff, the Secret
 * cache, and the hash of each MCP key mirror it applied (mirrors live in the gateway namespace, whose
 * Secrets the controller may not read, so it remembers what it wrote).
 */
export class Reconciler {
  readonly backoff: ItemBackoff;
  readonly secrets: SecretCache;
  private readonly mirrors = new Map<string, string>();
  /** Stale mirrors this process deleted (or found absent): not deleted again until a resync. */
  private readonly goneMirrors = new Set<string>();
  /** Last error of each failing apply or delete (`apply <key>` / `delete <key>`). */
  private readonly failing = new Map<string, string>();
  private readonly concurrency: number;
  private readonly now: () => Date;
  private readonly incremental: boolean;
  /** The previous render's inputs and outputs (incremental mode). */
  private renderMemo: RenderMemo | undefined;
  /**
   * Rendered object → the same with its hash annotation. The incremental render hands back the very
   * object of the previous pass when its content is unchanged, so identity is enough.
   */
  private hashed = new WeakMap<K8sObject, K8sObject>();
  /** Object key → the desired and live objects last found up to date (both by identity). */
  private readonly verified = new Map<string, { desired: K8sObject; live: K8sObject }>();
  /**
   * Resource (by identity: the caches replace an object on every change) → the inputs of its
   * conditions when its status last said exactly them, and the conditions' summary.
   */
  /** Mirror key → its content and the same with its hash annotation (mirrors are built per pass). */
  private readonly mirrorHashes = new Map<string, { sig: string; hashed: K8sObject }>();
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
  }

  /**
   * Periodic resync: forgets every remembered Secret read, so rotated MCP keys and JWKS are picked
   * up, and re-checks stale mirrors. Mirrors whose content is unchanged are not re-applied: their
   * hash is remembered for the life of the leadership term.
   */
  resync(): void {
    this.secrets.forget();
    this.goneMirrors.clear();
    // A resync also renders, hashes and compares everything afresh, so no memo can hide a mistake
    // for longer than the resync period.
    this.renderMemo = undefined;
    this.hashed = new WeakMap();
    this.verified.clear();
    this.mirrorHashes.clear();
    this.statusMemo = new WeakMap();
  }

  async pass(state: ClusterState): Promise<ReconcileResult> {
    const api = this.api;
    const stages = Object.fromEntries(PASS_STAGES.map((s) => [s, 0])) as Record<PassStage, number>;
    let mark = performance.now();
    const lap = (stage: PassStage) => {
      const t = performance.now();
      stages[stage] += t - mark;
      mark = t;
    };
    const live = (r: OwnResource) => !r.metadata.deletionTimestamp;
    const input: Resources = {
      platforms: state.own<RetrievalPlatform>('RetrievalPlatform').filter(live),
      agents: state.own<RetrievalAgent>('RetrievalAgent').filter(live),
      rooms: state.own<RetrievalRoom>('RetrievalRoom').filter(live),
      partners: state.own<PartnerClient>('PartnerClient').filter(live),
    };
    const platform = selectPlatform(input.platforms);
    // An upstream the design does not hold on: render nothing new and prune nothing, so whatever works
    // keeps working, and say what was seen on the RetrievalPlatform.
    const verdict = judgeUpstream(await api.upstream());
    lap('upstream');
    if (!verdict.supported) {
      const statusWrites = await reportUnsupported(
        api,
        state,
        input.platforms,
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
    const jwt = platform?.spec.jwt;
    if (platform && jwt?.jwksSecretRef) {
      const v = await this.secrets.readSecretKey(
        platform.spec.gateway.namespace,
        jwt.jwksSecretRef.name,
        jwt.jwksSecretRef.key,
      );
      if (v) input.jwksInline = v;
    }
    lap('upstream');
    let conflicts: Conflict[];
    let objects: K8sObject[];
    let agentsRendered: number;
    if (this.incremental) {
      const r = renderIncremental(input, this.renderMemo);
      this.renderMemo = r.memo;
      conflicts = r.conflicts;
      agentsRendered = r.agentsRendered;
      const hashed = new WeakMap<K8sObject, K8sObject>();
      objects = r.objects.map((o) => {
        const h = this.hashed.get(o) ?? withHash(o);
        hashed.set(o, h);
        return h;
      });
      this.hashed = hashed; // only this pass's objects: the previous ones may be collected
    } else {
      const rendered = render(input);
      conflicts = rendered.conflicts;
      agentsRendered = input.agents.length;
      objects = rendered.objects.map(withHash);
    }
    lap('render');
    // The MCP routes' API keys, mirrored from each Agent's own MCP credential (fails closed when absent).
    const mirror = await mirrorMcpKeys(this.secrets, objects);
    lap('mirror');

    let applied = 0;
    let unchanged = 0;
    let newFailures = 0;
    const t = () => this.now().getTime();
    const uids = new Map<string, string>();
    const desiredKeys = new Set(objects.map(objKey));
    for (const { secret } of mirror.secrets) desiredKeys.add(objKey(secret));
    const staleKeys = new Set(mirror.stale.map(objKey));
    // Failures of objects no longer desired (apply) or no longer to delete are forgotten, so they
    // cannot hold pruning back forever.
    for (const k of this.backoff.keys()) {
      const op = k.slice(0, k.indexOf(' '));
      const key = k.slice(k.indexOf(' ') + 1);
      const [apiVersion, kind, namespace, name] = key.split('|') as [string, string, string, string];
      const gone =
        op === 'apply'
          ? !desiredKeys.has(key)
          : desiredKeys.has(key) ||
            (kind === 'Secret'
              ? !staleKeys.has(key)
              : !state.live(apiVersion, kind, namespace || undefined, name));
      if (gone) this.forget(k);
    }
    const failed = (k: string, what: string, e: unknown) => {
      this.backoff.fail(k, t());
      if (this.backoff.failuresOf(k) === 1) newFailures++;
      // The API server's message names the object and the cause; it carries no object content.
      this.failing.set(k, `${what}: ${(e as Error).message}`.slice(0, 1024));
    };
    const applyOne = async (o: K8sObject, remember?: string) => {
      const key = objKey(o);
      const k = `apply ${key}`;
      if (this.backoff.waiting(k, t())) return; // still failing: its last error stays reported
      try {
        const stored = await api.apply(o);
        if (stored?.metadata?.uid) uids.set(key, stored.metadata.uid);
        if (stored?.metadata) state.stored?.({ ...stored, apiVersion: o.apiVersion, kind: o.kind });
        if (remember) {
          this.mirrors.set(key, remember);
          this.goneMirrors.delete(key);
        }
        this.forget(k);
        applied++;
      } catch (e) {
        failed(k, `apply ${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}`, e);
      }
    };
    const todo: K8sObject[] = [];
    for (const o of objects) {
      const key = objKey(o);
      const current = state.live(o.apiVersion, o.kind, o.metadata.namespace, o.metadata.name);
      const seen = this.verified.get(key);
      // The caches replace an object on every change, so the same two objects compare the same.
      const same = seen !== undefined && seen.desired === o && seen.live === current;
      const failing = this.backoff.size > 0 && this.backoff.failuresOf(`apply ${key}`) > 0;
      if (!failing && (same || upToDate(current, o))) {
        if (this.incremental && current && !same) this.verified.set(key, { desired: o, live: current });
        if (current?.metadata.uid) uids.set(key, current.metadata.uid);
        unchanged++;
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
    lap('compare');
    await eachLimited(todo, this.concurrency, (o) => applyOne(o));
    lap('apply');
    // Each mirrored key is owned by its Agent's MCP policy, applied above: the garbage collector then
    // removes the key with the policy, so the controller never needs to list Secrets.
    const mirrors: { secret: K8sObject; hash: string }[] = [];
    for (const { secret, ownerPolicy } of mirror.secrets) {
      const policyKey = `agentgateway.dev/v1alpha1|AgentgatewayPolicy|${secret.metadata.namespace}|${ownerPolicy}`;
      const uid = uids.get(policyKey);
      if (!uid) continue; // its policy failed to apply; that error is already recorded
      secret.metadata.ownerReferences = [
        { apiVersion: 'agentgateway.dev/v1alpha1', kind: 'AgentgatewayPolicy', name: ownerPolicy, uid },
      ];
      const mkey = objKey(secret);
      const sig = JSON.stringify([secret.metadata, (secret as { data?: unknown }).data]);
      const memoed = this.incremental ? this.mirrorHashes.get(mkey) : undefined;
      const hashed = memoed?.sig === sig ? memoed.hashed : withHash(secret);
      if (this.incremental) this.mirrorHashes.set(mkey, { sig, hashed });
      objects.push(hashed);
      desiredKeys.add(objKey(hashed));
      const hash = hashed.metadata.annotations?.[DESIRED_HASH] as string;
      if (this.mirrors.get(objKey(hashed)) === hash && !this.backoff.failuresOf(`apply ${objKey(hashed)}`))
        unchanged++;
      else mirrors.push({ secret: hashed, hash });
    }
    await eachLimited(mirrors, this.concurrency, ({ secret, hash }) => applyOne(secret, hash));
    lap('mirror');

    // Prune only when no object is failing, so a transient failure never removes a working route.
    let pruned = 0;
    if (this.backoff.size === 0) {
      const doomed: K8sObject[] = [];
      // A key whose source is unusable must stop working now, not when its policy goes. Mirrors
      // cannot be listed, so one is deleted by name unless this process already saw it gone.
      for (const s of mirror.stale) if (!this.goneMirrors.has(objKey(s))) doomed.push(s);
      for (const k of RENDERED_KINDS) {
        const existing = state.rendered(k.apiVersion, k.kind);
        if (!existing) continue; // not cached (kind not served or not synced): prune nothing of it
        for (const o of existing) {
          const key = `${k.apiVersion}|${k.kind}|${o.metadata.namespace ?? ''}|${o.metadata.name}`;
          if (!desiredKeys.has(key)) doomed.push({ ...o, apiVersion: k.apiVersion, kind: k.kind });
        }
      }
      await eachLimited(doomed, this.concurrency, async (o) => {
        const key = objKey(o);
        try {
          if (await api.delete(o)) pruned++;
          if (o.kind === 'Secret') {
            this.mirrors.delete(key);
            this.goneMirrors.add(key);
          }
          state.removed?.(o);
          this.forget(`delete ${key}`);
        } catch (e) {
          failed(`delete ${key}`, `delete ${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}`, e);
        }
      });
    }
    lap('prune');
    // What the conditions report: every object still failing, in a stable order, so a retry that
    // fails the same way writes no status.
    const errors = [...this.failing.values()].sort();
    const errorsSig = `${errors.length}\u0000${errors[0] ?? ''}`;
    const verdictSig = JSON.stringify([verdict.supported, verdict.seen, verdict.problems]);

    const byKey = new Map(conflicts.map((c) => [resourceKey({ kind: c.kind, metadata: c }), c]));
    const stamp = this.now().toISOString();
    const computed: ReconcileResult['conditions'] = [];
    const statusTodo: { res: OwnResource; conditions: Condition[]; conflict?: Conflict; problem?: string }[] =
      [];
    for (const res of [
      ...input.platforms,
      ...input.agents,
      ...input.rooms,
      ...input.partners,
    ] as OwnResource[]) {
      const conflict = byKey.get(resourceKey(res));
      const problem =
        res.kind === 'RetrievalAgent'
          ? mirror.problems.get(`${res.metadata.namespace}/${res.metadata.name}`)
          : undefined;
      // Everything the conditions are computed from, besides the resource itself.
      const sig = this.incremental
        ? JSON.stringify([
            conflict?.reason ?? null,
            conflict?.message ?? null,
            errorsSig,
            problem ?? null,
            res.kind === 'RetrievalPlatform' ? verdictSig : null,
          ])
        : '';
      const memo = this.incremental ? this.statusMemo.get(res) : undefined;
      if (memo !== undefined && memo.sig === sig) {
        for (const c of memo.computed) computed.push(c);
        continue;
      }
      const conditions = conditionsFor(res, conflict, errors, stamp, problem);
      if (res.kind === 'RetrievalPlatform') conditions.push(upstreamCondition(res, verdict, stamp));
      const summary = conditions.map((c) => ({
        kind: res.kind,
        type: c.type,
        status: c.status,
        reason: c.reason,
      }));
      for (const c of summary) computed.push(c);
      if (
        sameConditions(res.status?.conditions, conditions) &&
        res.status?.observedGeneration === res.metadata.generation
      ) {
        if (this.incremental) this.statusMemo.set(res, { sig, computed: summary });
        continue;
      }
      statusTodo.push({
        res,
        conditions,
        ...(conflict ? { conflict } : {}),
        ...(problem ? { problem } : {}),
      });
    }
    let statusWrites = 0;
    const statusErrors: string[] = [];
    await eachLimited(statusTodo, this.concurrency, async ({ res, conditions, conflict, problem }) => {
      const wasConflict = res.status?.conditions?.find((c) => c.type === 'Conflict')?.status === 'True';
      const hadProblem =
        res.status?.conditions?.find((c) => c.type === 'Degraded')?.reason === 'McpKeyUnavailable';
      try {
        const stored = await api.patchStatus(res, {
          ...(res.metadata.generation !== undefined ? { observedGeneration: res.metadata.generation } : {}),
          conditions,
        });
        statusWrites++;
        if (stored && (stored as K8sObject).metadata)
          state.stored?.({ ...(stored as K8sObject), apiVersion: res.apiVersion, kind: res.kind });
        if (conflict && !wasConflict) await api.event(res, 'Warning', conflict.reason, conflict.message);
        if (!conflict && wasConflict)
          await api.event(res, 'Normal', 'ConflictResolved', 'the resource renders again');
        if (problem && !hadProblem) await api.event(res, 'Warning', 'McpKeyUnavailable', problem);
      } catch (e) {
        statusErrors.push(`status ${res.kind} ${res.metadata.name}: ${(e as Error).message}`);
      }
    });
    // One Warning per pass in which an object started failing (not one per retry).
    if (newFailures > 0 && platform) {
      await api.event(platform, 'Warning', 'ApplyFailed', errors[0] as string).catch(() => undefined);
    }
    lap('status');
    const retryAt = this.backoff.nextDue();
    log.info('reconciled', {
      applied,
      unchanged,
      pruned,
      statusWrites,
      conflicts: conflicts.length,
      errors: errors.length + statusErrors.length,
    });
    return {
      applied,
      unchanged,
      pruned,
      statusWrites,
      conflicts,
      errors: [...errors, ...statusErrors],
      conditions: computed,
      ...(retryAt !== undefined ? { retryAt } : {}),
      stages,
      agentsRendered,
    };
  }

  private forget(k: string): void {
    this.backoff.forget(k);
    this.failing.delete(k);
  }
}

function upstreamCondition(res: OwnResource, v: UpstreamVerdict, now: string): Condition {
  const prev = res.status?.conditions?.find((c) => c.type === 'UpstreamSupported');
  const status = v.supported ? 'True' : 'False';
  return {
    type: 'UpstreamSupported',
    status,
    reason: v.supported ? 'Supported' : 'UnsupportedUpstream',
    message: (v.supported ? `seen ${v.seen}` : `seen ${v.seen}: ${v.problems.join('; ')}`).slice(0, 1024),
    ...(res.metadata.generation !== undefined ? { observedGeneration: res.metadata.generation } : {}),
    lastTransitionTime:
      prev && prev.status === status && prev.lastTransitionTime ? prev.lastTransitionTime : now,
  };
}

/** Ready=False/UnsupportedUpstream plus UpstreamSupported=False on each platform; other conditions stay. */
async function reportUnsupported(
  api: ClusterWriter,
  state: ClusterState,
  platforms: RetrievalPlatform[],
  v: UpstreamVerdict,
  now: string,
): Promise<number> {
  let writes = 0;
  for (const p of platforms) {
    const upstream = upstreamCondition(p, v, now);
    const prev = p.status?.conditions ?? [];
    const oldReady = prev.find((c) => c.type === 'Ready');
    const ready: Condition = {
      type: 'Ready',
      status: 'False',
      reason: 'UnsupportedUpstream',
      message: 'nothing new is rendered until kagent and agentgateway are supported versions',
      ...(p.metadata.generation !== undefined ? { observedGeneration: p.metadata.generation } : {}),
      lastTransitionTime:
        oldReady?.status === 'False' && oldReady.lastTransitionTime ? oldReady.lastTransitionTime : now,
    };
    const conditions = [
      ready,
      ...prev.filter((c) => c.type !== 'Ready' && c.type !== 'UpstreamSupported'),
      upstream,
    ];
    if (sameConditions(prev, conditions)) continue;
    const was = prev.find((c) => c.type === 'UpstreamSupported')?.status === 'False';
    const stored = await api.patchStatus(p, { conditions });
    writes++;
    if (stored && (stored as K8sObject).metadata)
      state.stored?.({ ...(stored as K8sObject), apiVersion: p.apiVersion, kind: p.kind });
    if (!was) await api.event(p, 'Warning', 'UnsupportedUpstream', upstream.message).catch(() => undefined);
  }
  return writes;
}
