/**
 * Test double: a small kube-apiserver over node:http, faithful to what the controller uses (Kubernetes API
 * conventions): discovery (`/api/v1`, `/apis/<g>/<v>` APIResourceLists), LIST with label selectors,
 * pages of a LIST (`limit`, `continue`: one consistent snapshot; 410 Expired once it is gone),
 * WATCH streams (newline-delimited `{type, object}`; synthetic ADDED on start without resourceVersion),
 * GET, POST (generateName), PUT with resourceVersion conflicts (409), server-side apply PATCH
 * (`application/apply-patch+yaml`, `fieldManager`, `force`; a no-op apply changes nothing and emits no
 * event; `metadata.generation` bumps when `spec` changes), merge-patch on `/status`, DELETE.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { allCrds } from '../../crds/schema.ts';
import { crValidator } from '../../crds/validate.ts';
import { apply as applyFields, managedFields, type Ownership, update } from './fields.ts';
import { REPO } from './fixtures.ts';
import { type Attributes, forbiddenMessage, RbacAuthorizer, serviceAccountUser } from './rbac.ts';
import { type KindInfo, kagent09, type UpstreamProfile } from './upstreams.ts';

type Obj = Record<string, any>;

/** Kinds every profile serves; kagent and agentgateway kinds come from the upstream profile. */
const BASE_KINDS: KindInfo[] = [
  { apiVersion: 'v1', kind: 'ConfigMap', plural: 'configmaps', namespaced: true },
  { apiVersion: 'v1', kind: 'Secret', plural: 'secrets', namespaced: true },
  { apiVersion: 'v1', kind: 'Event', plural: 'events', namespaced: true },
  { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', plural: 'networkpolicies', namespaced: true },
  { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', plural: 'leases', namespaced: true },
  {
    apiVersion: 'gateway.networking.k8s.io/v1beta1',
    kind: 'ReferenceGrant',
    plural: 'referencegrants',
    namespaced: true,
  },
  { apiVersion: 'gateway.networking.k8s.io/v1', kind: 'HTTPRoute', plural: 'httproutes', namespaced: true },
  {
    apiVersion: 'retrieval.fgentic.dev/v1alpha1',
    kind: 'RetrievalPlatform',
    plural: 'retrievalplatforms',
    namespaced: false,
  },
  {
    apiVersion: 'retrieval.fgentic.dev/v1alpha1',
    kind: 'RetrievalAgent',
    plural: 'retrievalagents',
    namespaced: true,
  },
  {
    apiVersion: 'retrieval.fgentic.dev/v1alpha1',
    kind: 'RetrievalRoom',
    plural: 'retrievalrooms',
    namespaced: false,
  },
  {
    apiVersion: 'retrieval.fgentic.dev/v1alpha1',
    kind: 'PartnerClient',
    plural: 'partnerclients',
    namespaced: false,
  },
];

interface Watcher {
  info: KindInfo;
  namespace?: string;
  selector: [string, string][];
  fields?: FieldTerm[];
  res: ServerResponse;
  bookmarks: boolean;
}

function sameOwners(a: Ownership, b: Ownership): boolean {
  const flat = (o: Ownership) => JSON.stringify([...o].map(([m, x]) => [m, x.operation, [...x.fields].sort()]).sort());
  return flat(a) === flat(b);
}

export interface ApplyRecord {
  kind: string;
  namespace?: string;
  name: string;
  fieldManager: string | null;
  force: string | null;
  contentType: string | undefined;
}

const key = (info: KindInfo, ns: string | undefined, name: string) =>
  `${info.apiVersion}|${info.kind}|${ns ?? ''}|${name}`;

function status(res: ServerResponse, code: number, reason: string, message: string, details?: Obj) {
  res.writeHead(code, { 'content-type': 'application/json' });
  res.end(
    JSON.stringify({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message,
      reason,
      ...(details ? { details } : {}),
      code,
    }),
  );
}

/** The controller's ServiceAccount (docs/interfaces.md fixes its name). */
export const CONTROLLER_USER = serviceAccountUser('fgentic-system', 'fgentic-retrieval-controller');
export const WEBHOOK_USER = serviceAccountUser('fgentic-system', 'fgentic-retrieval-webhook');
/** A cluster admin (group system:masters): what tests use to seed objects over HTTP. */
export const ADMIN_USER = 'kubernetes-admin';

/** A request as fault injection sees it. */
export interface RequestInfo {
  method: string;
  path: string;
  query: URLSearchParams;
  /** True for `?watch=true` GETs. */
  watch: boolean;
}

/**
 * What an injected fault does with a request: answer it with an error Status (with `Retry-After`
 * when given, as kube-apiserver's API Priority and Fairness does with 429), hold it unanswered until
 * `release()` (a hung request), or, for a watch, answer 200 and end the stream at once.
 */
export type Fault =
  | { status: number; reason: string; message?: string; retryAfterSeconds?: number }
  | { hang: true }
  | { endAtOnce: true };

/**
 * kube-apiserver's size limits: a request body above 3 MiB is refused with 413 before decoding
 * (`apiserver/pkg/server/config.go` MaxRequestBodyBytes = 3 MiB); a ConfigMap whose data and
 * binaryData exceed 1 MiB fails validation with 422 (`validation.ValidateConfigMap`,
 * `core.MaxSecretSize`-style `totalSize > 1024*1024`); and etcd refuses a stored object above its
 * `--max-request-bytes` (1.5 MiB by default) with "etcdserver: request is too large" (a 500).
 */
export const MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024;
export const CONFIGMAP_MAX_BYTES = 1024 * 1024;
export const ETCD_MAX_REQUEST_BYTES = 1.5 * 1024 * 1024;

export interface ApiServerOptions {
  /** The authorizer; default: the RBAC shipped in deploy/base. */
  rbac?: RbacAuthorizer;
  /** Added before every response (a slow apiserver, for load tests). */
  latencyMs?: number;
  /** The kagent/agentgateway APIs served (default kagent v0.9.11 + agentgateway v1alpha1). */
  upstream?: UpstreamProfile;
}

/** Our CRDs, as served: create, update and apply of our kinds are validated against them. */
const ownCrds = crValidator(allCrds());

const groupOf = (apiVersion: string) => (apiVersion.includes('/') ? apiVersion.split('/')[0] : '') as string;

function parseSelector(s: string | null): [string, string][] {
  if (!s) return [];
  return s.split(',').map((p) => {
    const [k, v] = p.split('=');
    return [k as string, v ?? ''];
  });
}

/** One term of a field selector: `metadata.name` or `metadata.namespace`, `=`/`==` or `!=`. */
type FieldTerm = { field: 'metadata.name' | 'metadata.namespace'; equal: boolean; value: string };

/**
 * A field selector as kube-apiserver accepts it for every kind: terms on `metadata.name` and
 * `metadata.namespace` only (any other field is a 400 BadRequest), comma-separated, all required.
 * `undefined`: not a selector this double (or the API server, for ConfigMaps) serves.
 */
function parseFieldSelector(s: string | null): FieldTerm[] | undefined {
  if (!s) return [];
  const terms: FieldTerm[] = [];
  for (const part of s.split(',')) {
    const m = /^([^!=]+)(==|!=|=)(.*)$/.exec(part);
    if (!m || (m[1] !== 'metadata.name' && m[1] !== 'metadata.namespace')) return undefined;
    terms.push({ field: m[1], equal: m[2] !== '!=', value: m[3] as string });
  }
  return terms;
}

function matches(o: Obj, ns: string | undefined, sel: [string, string][], fields: FieldTerm[] = []): boolean {
  if (ns && o['metadata'].namespace !== ns) return false;
  const labels = o['metadata'].labels ?? {};
  if (!sel.every(([k, v]) => labels[k] === v)) return false;
  return fields.every(
    (t) => (o['metadata'][t.field === 'metadata.name' ? 'name' : 'namespace'] === t.value) === t.equal,
  );
}

function content(o: Obj): string {
  const { metadata, status: _s, ...rest } = o;
  return JSON.stringify({
    rest,
    labels: metadata?.labels ?? {},
    owners: metadata?.ownerReferences ?? [],
    ann: metadata?.annotations ?? {},
  });
}

export class ApiServerDouble {
  private store = new Map<string, Obj>();
  private fieldOwners = new Map<string, Ownership>();
  private watchers = new Set<Watcher>();
  private rv = 100;
  /** Events kept for watches that resume from a resourceVersion (etcd's compaction window). */
  private history: { rv: number; info: KindInfo; type: string; object: Obj }[] = [];
  /** Watches from a resourceVersion older than this get 410 Gone. */
  private compactedRv = 0;
  historyLimit = 10_000;
  private server?: Server;
  private tokens = new Map<string, string>();
  readonly rbac: RbacAuthorizer;
  latencyMs: number;
  /** Every authorized resource request, with the attributes RBAC decided on. */
  readonly calls: Attributes[] = [];
  /** Every request RBAC refused. */
  readonly denied: Attributes[] = [];
  readonly applies: ApplyRecord[] = [];
  readonly requests: string[] = [];
  /** Kinds whose server-side apply fails with 500 (fault injection). */
  readonly failApply = new Set<string>();
  /** Single objects (`Kind/namespace/name`, namespace empty when cluster-scoped) whose apply fails with 500. */
  readonly failApplyObjects = new Set<string>();
  /** Fault injection: asked for every request before it is served; a fault answers it instead. */
  fault: ((r: RequestInfo) => Fault | undefined) | undefined;
  /** Requests held by a `hang` fault. */
  private held = new Set<ServerResponse>();
  /** Every request body size above the limits, refused (for tests). */
  readonly tooLarge: string[] = [];
  port = 0;

  private kinds: KindInfo[] = [];
  private upstream!: UpstreamProfile;

  constructor(o: ApiServerOptions = {}) {
    this.rbac = o.rbac ?? RbacAuthorizer.fromKustomize(join(REPO, 'deploy', 'base'));
    this.latencyMs = o.latencyMs ?? 0;
    this.setUpstream(o.upstream ?? kagent09());
  }

  /** Serves other upstream APIs from now on (an upgrade); stored objects of kinds gone stay stored. */
  setUpstream(p: UpstreamProfile): void {
    this.upstream = p;
    this.kinds = [...BASE_KINDS, ...p.kinds];
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      let body = '';
      let bytes = 0;
      // A client that gives up on a held request aborts it: no error for the server.
      req.on('error', () => undefined);
      res.on('error', () => undefined);
      req.on('data', (c: Buffer) => {
        bytes += c.length;
        if (bytes <= MAX_REQUEST_BODY_BYTES) body += c;
      });
      req.on('end', () => {
        const run = () => {
          try {
            if (bytes > MAX_REQUEST_BODY_BYTES) {
              this.tooLarge.push(`${req.method} ${req.url}`);
              return status(res, 413, 'RequestEntityTooLarge', 'the request is too large', {});
            }
            if (this.injected(req, res)) return;
            this.handle(req, res, body);
          } catch (e) {
            status(res, 500, 'InternalError', (e as Error).message);
          }
        };
        if (this.latencyMs > 0) setTimeout(run, this.latencyMs);
        else run();
      });
    });
    await new Promise<void>((r) => this.server?.listen(0, '127.0.0.1', r));
    const a = this.server.address();
    this.port = typeof a === 'object' && a ? a.port : 0;
    return this;
  }

  /** Serves an injected fault instead of the request; true when it did. */
  private injected(req: IncomingMessage, res: ServerResponse): boolean {
    if (!this.fault) return false;
    const url = new URL(req.url ?? '/', 'http://double');
    const watch = url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1';
    const f = this.fault({ method: req.method ?? 'GET', path: url.pathname, query: url.searchParams, watch });
    if (!f) return false;
    this.requests.push(`${req.method} ${url.pathname}${url.search}`);
    if ('hang' in f) {
      this.held.add(res);
      res.on('close', () => this.held.delete(res));
      return true;
    }
    if ('endAtOnce' in f) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end();
      return true;
    }
    if (f.retryAfterSeconds !== undefined) res.setHeader('retry-after', String(f.retryAfterSeconds));
    status(res, f.status, f.reason, f.message ?? `injected ${f.status}`);
    return true;
  }

  /** Ends every request held by a `hang` fault by cutting its connection. */
  release(): void {
    for (const r of this.held) r.destroy();
    this.held.clear();
  }

  /** Requests held by a `hang` fault right now. */
  get hanging(): number {
    return this.held.size;
  }

  async stop(): Promise<void> {
    this.release();
    for (const w of this.watchers) w.res.end();
    this.watchers.clear();
    this.server?.closeAllConnections();
    await new Promise<void>((r) => this.server?.close(() => r()));
  }

  /** A bearer token that authenticates as `user`. */
  token(user: string): string {
    const token = randomUUID();
    this.tokens.set(token, user);
    return token;
  }

  /** A kubeconfig authenticating as `user` (a ServiceAccount's username; default the controller's). */
  kubeConfig(user = CONTROLLER_USER): k8s.KubeConfig {
    const token = this.token(user);
    const kc = new k8s.KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'double', server: `http://127.0.0.1:${this.port}`, skipTLSVerify: true }],
      users: [{ name: 'controller', token }],
      contexts: [{ name: 'double', cluster: 'double', user: 'controller' }],
      currentContext: 'double',
    });
    return kc;
  }

  /**
   * A list, or one page of it (`limit` and `continue`, as kube-apiserver serves them): the first
   * page takes a snapshot at the current resourceVersion, and every later page of that list comes
   * from it, so the pages together are one consistent list. A continue token whose snapshot is gone
   * (its resourceVersion compacted away, or too many lists in flight) is `expired` (410).
   */
  private page(
    q: URLSearchParams,
    select: () => Obj[],
  ): { items: Obj[]; rv: string; continue?: string; remaining?: number } | 'expired' {
    const limit = Number(q.get('limit') ?? 0);
    const token = q.get('continue');
    let snap: { items: Obj[]; rv: number } | undefined;
    let offset = 0;
    let id: number | undefined;
    if (token) {
      let t: { id?: number; offset?: number } = {};
      try {
        t = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
      } catch {
        return 'expired';
      }
      id = t.id;
      snap = this.snapshots.get(id ?? -1);
      if (!snap || snap.rv < this.compactedRv) return 'expired';
      offset = t.offset ?? 0;
    } else {
      const items = select();
      if (!(limit > 0) || items.length <= limit) return { items, rv: String(this.rv) };
      snap = { items, rv: this.rv };
    }
    const end = limit > 0 ? offset + limit : snap.items.length;
    const items = snap.items.slice(offset, end);
    if (end >= snap.items.length) {
      if (id !== undefined) this.snapshots.delete(id);
      return { items, rv: String(snap.rv) };
    }
    if (id === undefined) {
      id = this.nextSnapshot++;
      this.snapshots.set(id, snap);
      // Lists abandoned half-way are forgotten, oldest first.
      for (const k of this.snapshots.keys()) if (this.snapshots.size > 64) this.snapshots.delete(k);
    }
    return {
      items,
      rv: String(snap.rv),
      continue: Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', id, offset: end })).toString('base64url'),
      remaining: snap.items.length - end,
    };
  }
  /** Paginated lists in flight: their snapshots, by id (continue tokens name them). */
  private readonly snapshots = new Map<number, { items: Obj[]; rv: number }>();
  private nextSnapshot = 0;

  // ---- direct store access for tests ---------------------------------------------------------
  private info(apiVersion: string, kind: string): KindInfo {
    const i = [...BASE_KINDS, ...this.kinds].find((k) => k.apiVersion === apiVersion && k.kind === kind);
    if (!i) throw new Error(`unknown kind ${apiVersion} ${kind}`);
    return i;
  }

  /** Writes storage directly, as etcd would: no authorization, admission or validation. */
  put(obj: Obj): Obj {
    const info = this.info(obj['apiVersion'], obj['kind']);
    const k = key(info, obj['metadata'].namespace, obj['metadata'].name);
    const prev = this.store.get(k);
    const next = structuredClone(obj);
    next['metadata'] = {
      ...next['metadata'],
      uid: prev?.['metadata'].uid ?? randomUUID(),
      creationTimestamp: prev?.['metadata'].creationTimestamp ?? new Date().toISOString(),
      generation: prev
        ? prev['metadata'].generation + (JSON.stringify(prev['spec']) !== JSON.stringify(next['spec']) ? 1 : 0)
        : 1,
      resourceVersion: String(++this.rv),
    };
    if (prev?.['metadata'].deletionTimestamp) next['metadata'].deletionTimestamp = prev['metadata'].deletionTimestamp;
    if (prev?.['status'] && !next['status']) next['status'] = prev['status'];
    this.store.set(k, next);
    this.emit(info, prev ? 'MODIFIED' : 'ADDED', next);
    return next;
  }

  get(apiVersion: string, kind: string, namespace: string | undefined, name: string): Obj | undefined {
    return this.store.get(key(this.info(apiVersion, kind), namespace, name));
  }

  list(apiVersion: string, kind: string): Obj[] {
    const info = this.info(apiVersion, kind);
    return [...this.store.values()].filter((o) => o['apiVersion'] === info.apiVersion && o['kind'] === info.kind);
  }

  remove(apiVersion: string, kind: string, namespace: string | undefined, name: string): boolean {
    const info = this.info(apiVersion, kind);
    const k = key(info, namespace, name);
    const o = this.store.get(k);
    if (!o) return false;
    this.store.delete(k);
    this.fieldOwners.delete(k);
    const gone = { ...o, metadata: { ...o['metadata'], resourceVersion: String(++this.rv) } };
    this.emit(info, 'DELETED', gone);
    this.collectGarbage();
    return true;
  }

  /**
   * The garbage collector of kube-controller-manager, background propagation: an object whose every
   * owner reference names a uid that no longer exists is deleted (namespaced owners are looked up in
   * the dependent's namespace, as upstream).
   */
  private collectGarbage(): void {
    const uids = new Set([...this.store.values()].map((o) => o['metadata'].uid));
    for (const o of [...this.store.values()]) {
      const refs = (o['metadata'].ownerReferences ?? []) as Obj[];
      if (refs.length > 0 && refs.every((r) => !uids.has(r['uid'])))
        this.remove(o['apiVersion'], o['kind'], o['metadata'].namespace, o['metadata'].name);
    }
  }

  private emit(info: KindInfo, type: string, obj: Obj) {
    const rv = Number(obj['metadata'].resourceVersion);
    this.history.push({ rv, info, type, object: obj });
    if (this.history.length > this.historyLimit)
      this.compact(this.history[this.history.length - this.historyLimit]?.rv);
    for (const w of this.watchers)
      if (w.info === info && matches(obj, w.namespace, w.selector, w.fields))
        w.res.write(`${JSON.stringify({ type, object: obj })}\n`);
  }

  /**
   * Forgets events before `rv` (default: all but the current revision), as etcd compaction does; older
   * watches get 410 Gone. Like etcd, it never compacts past the current revision, so a watch from the
   * resourceVersion of a fresh list is always served.
   */
  compact(rv = this.rv): void {
    rv = Math.min(rv, this.rv);
    this.compactedRv = Math.max(this.compactedRv, rv);
    this.history = this.history.filter((e) => e.rv >= rv);
  }

  /**
   * Ends every open watch normally, as kube-apiserver does when a watch reaches its timeout; clients
   * resume from the last resourceVersion they saw.
   */
  endWatches(): void {
    for (const w of this.watchers) w.res.end();
    this.watchers.clear();
  }

  /** Watches currently open (registered and not yet ended). */
  get openWatches(): number {
    return this.watchers.size;
  }

  /** The current resourceVersion (the highest one written). */
  get resourceVersion(): number {
    return this.rv;
  }

  /** Sends a BOOKMARK with the current resourceVersion to every watch that allowed bookmarks. */
  bookmark(): void {
    for (const w of this.watchers)
      if (w.bookmarks)
        w.res.write(
          `${JSON.stringify({
            type: 'BOOKMARK',
            object: {
              kind: w.info.kind,
              apiVersion: w.info.apiVersion,
              metadata: { resourceVersion: String(this.rv) },
            },
          })}\n`,
        );
  }

  /**
   * A watch as kube-apiserver serves it: without a resourceVersion (or "0") it starts with synthetic
   * ADDED events for the current state; from a resourceVersion it replays what happened after it, or,
   * when that version is compacted away, sends one ERROR event with a 410 Expired Status and ends.
   */
  private watch(
    res: ServerResponse,
    info: KindInfo,
    ns: string | undefined,
    sel: [string, string][],
    q: URLSearchParams,
    fields: FieldTerm[] = [],
  ) {
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders(); // a watch is established once its headers arrive (client-node awaits them)
    const from = q.get('resourceVersion');
    if (from && from !== '0' && Number(from) < this.compactedRv) {
      res.end(
        `${JSON.stringify({
          type: 'ERROR',
          object: {
            kind: 'Status',
            apiVersion: 'v1',
            metadata: {},
            status: 'Failure',
            message: `too old resource version: ${from} (${this.compactedRv})`,
            reason: 'Expired',
            code: 410,
          },
        })}\n`,
      );
      return;
    }
    const w: Watcher = {
      info,
      ...(ns ? { namespace: ns } : {}),
      selector: sel,
      fields,
      res,
      bookmarks: q.get('allowWatchBookmarks') === 'true',
    };
    if (!from || from === '0') {
      for (const o of this.list(info.apiVersion, info.kind))
        if (matches(o, ns, sel, fields)) res.write(`${JSON.stringify({ type: 'ADDED', object: o })}\n`);
    } else
      for (const e of this.history)
        if (e.rv > Number(from) && e.info === info && matches(e.object, ns, sel, fields))
          res.write(`${JSON.stringify({ type: e.type, object: e.object })}\n`);
    this.watchers.add(w);
    res.on('close', () => this.watchers.delete(w));
  }

  private owners(k: string): Ownership {
    return this.fieldOwners.get(k) ?? new Map();
  }

  /** kube-apiserver refuses new finalizers on an object that is being deleted. */
  private finalizerAddedWhileDeleting(res: ServerResponse, qualified: string, prev: Obj, next: Obj): boolean {
    if (!prev['metadata'].deletionTimestamp) return false;
    const had = new Set(prev['metadata'].finalizers ?? []);
    const added = ((next['metadata']?.finalizers ?? []) as string[]).filter((f) => !had.has(f));
    if (added.length === 0) return false;
    status(
      res,
      422,
      'Invalid',
      `${qualified} "${prev['metadata'].name}" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers ${JSON.stringify(added)}`,
    );
    return true;
  }

  /**
   * A write through the API: server-owned metadata is kept, status is kept (the status subresource is
   * the only way to change it), field owners are recorded, and an object being deleted whose last
   * finalizer went is removed.
   */
  /**
   * The ConfigMap data limit (422, as `validation.ValidateConfigMap`) and etcd's request limit (500,
   * as etcd answers "request is too large"); writes the error and returns true when a limit is hit.
   */
  private oversized(res: ServerResponse, info: KindInfo, obj: Obj): boolean {
    if (info.kind === 'ConfigMap' && info.apiVersion === 'v1') {
      let total = 0;
      for (const [k, v] of Object.entries((obj['data'] ?? {}) as Record<string, string>))
        total += Buffer.byteLength(k) + Buffer.byteLength(String(v));
      for (const [k, v] of Object.entries((obj['binaryData'] ?? {}) as Record<string, string>))
        total += Buffer.byteLength(k) + Buffer.from(String(v), 'base64').length;
      if (total > CONFIGMAP_MAX_BYTES) {
        this.tooLarge.push(`ConfigMap ${obj['metadata']?.name}`);
        status(
          res,
          422,
          'Invalid',
          `ConfigMap "${obj['metadata']?.name}" is invalid: []: Too long: must have at most ${CONFIGMAP_MAX_BYTES} bytes`,
        );
        return true;
      }
    }
    if (Buffer.byteLength(JSON.stringify(obj)) > ETCD_MAX_REQUEST_BYTES) {
      this.tooLarge.push(`${info.kind} ${obj['metadata']?.name}`);
      status(res, 500, 'InternalError', 'etcdserver: request is too large');
      return true;
    }
    return false;
  }

  private write(info: KindInfo, prev: Obj | undefined, obj: Obj, owners: Ownership): Obj {
    const next = structuredClone(obj);
    next['metadata'] = { ...next['metadata'] };
    for (const f of ['uid', 'creationTimestamp', 'generation', 'deletionTimestamp', 'resourceVersion', 'managedFields'])
      delete next['metadata'][f];
    if (prev?.['metadata'].deletionTimestamp) next['metadata'].deletionTimestamp = prev['metadata'].deletionTimestamp;
    delete next['status'];
    if (prev?.['status']) next['status'] = prev['status'];
    next['metadata'].managedFields = managedFields(owners, info.apiVersion);
    const k = key(info, next['metadata'].namespace, next['metadata'].name);
    this.fieldOwners.set(k, owners);
    const stored = this.put(next);
    if (stored['metadata'].deletionTimestamp && (stored['metadata'].finalizers ?? []).length === 0) {
      this.remove(info.apiVersion, info.kind, stored['metadata'].namespace, stored['metadata'].name);
      this.fieldOwners.delete(k);
    }
    return stored;
  }

  /**
   * Structural schema + CEL validation of our own kinds on create and update (kube-apiserver answers
   * 422 Invalid with the failing fields as causes). Objects of other groups are not validated here.
   */
  private invalid(res: ServerResponse, info: KindInfo, obj: Obj): boolean {
    if (!ownCrds.has(info.apiVersion, info.kind)) return false;
    const problems = ownCrds.validate({ ...obj, apiVersion: info.apiVersion, kind: info.kind });
    if (problems.length === 0) return false;
    const group = groupOf(info.apiVersion);
    status(res, 422, 'Invalid', `${info.kind}.${group} "${obj['metadata']?.name}" is invalid: ${problems.join(', ')}`, {
      name: obj['metadata']?.name,
      group,
      kind: info.kind,
      causes: problems.map((message) => ({ reason: 'FieldValueInvalid', message })),
    });
    return true;
  }

  /**
   * Discovery and OpenAPI, non-resource URLs every authenticated user may read (system:discovery):
   * `/apis` lists the served groups and versions; `/openapi/v3/apis/<g>/<v>` the served kinds' schemas.
   */
  private nonResource(res: ServerResponse, parts: string[]): boolean {
    const json = (o: unknown) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(o));
    };
    if (parts.length === 1 && parts[0] === 'apis') {
      const groups = new Map<string, string[]>();
      for (const k of this.kinds) {
        if (!k.apiVersion.includes('/')) continue;
        const [g, v] = k.apiVersion.split('/') as [string, string];
        const vs = groups.get(g) ?? [];
        if (!vs.includes(v)) vs.push(v);
        groups.set(g, vs);
      }
      json({
        kind: 'APIGroupList',
        apiVersion: 'v1',
        groups: [...groups].map(([name, versions]) => ({
          name,
          versions: versions.map((version) => ({ groupVersion: `${name}/${version}`, version })),
          preferredVersion: {
            groupVersion: `${name}/${versions[versions.length - 1]}`,
            version: versions[versions.length - 1],
          },
        })),
      });
      return true;
    }
    if (parts[0] === 'openapi' && parts[1] === 'v3' && parts[2] === 'apis' && parts.length === 5) {
      const [g, v] = [parts[3] as string, parts[4] as string];
      const served = this.kinds.filter((k) => k.apiVersion === `${g}/${v}`);
      if (served.length === 0) {
        status(res, 404, 'NotFound', 'the server could not find the requested resource');
        return true;
      }
      const schemas: Record<string, unknown> = {};
      const agent = served.find((k) => k.kind === 'Agent' && g === 'kagent.dev' && v === 'v1alpha2');
      if (agent && this.upstream.agentSchema)
        schemas[`dev.kagent.v1alpha2.Agent`] = {
          ...this.upstream.agentSchema,
          'x-kubernetes-group-version-kind': [{ group: g, kind: 'Agent', version: v }],
        };
      json({
        openapi: '3.0.0',
        info: { title: 'Kubernetes', version: 'v1.30.0' },
        paths: {},
        components: { schemas },
      });
      return true;
    }
    return false;
  }

  /**
   * Authentication (bearer token → user) and RBAC, as kube-apiserver: 401 without a known token,
   * 403 Forbidden with the apiserver's Status body when no rule allows the request.
   */
  private authenticate(req: IncomingMessage): string | undefined {
    const m = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
    return m ? this.tokens.get(m[1] as string) : undefined;
  }

  /** Records and decides one request; writes the 403 itself and returns false when refused. */
  private authorize(res: ServerResponse, a: Attributes, message?: (a: Attributes) => string): boolean {
    if (a.user === ADMIN_USER) return true;
    if (this.rbac.authorize(a)) {
      this.calls.push(a);
      return true;
    }
    this.denied.push(a);
    status(res, 403, 'Forbidden', (message ?? forbiddenMessage)(a), {
      ...(a.name ? { name: a.name } : {}),
      ...(a.group ? { group: a.group } : {}),
      kind: a.resource,
    });
    return false;
  }

  /**
   * OwnerReferencesPermissionEnforcement (kube-apiserver admission, on by default): setting
   * blockOwnerDeletion on a new owner reference needs `update` on the owner's `finalizers`.
   */
  private ownerRefsAllowed(res: ServerResponse, user: string, prev: Obj | undefined, next: Obj): boolean {
    const before = new Set(
      ((prev?.['metadata']?.ownerReferences ?? []) as Obj[])
        .filter((r) => r['blockOwnerDeletion'])
        .map((r) => r['uid']),
    );
    for (const r of (next['metadata']?.ownerReferences ?? []) as Obj[]) {
      if (!r['blockOwnerDeletion'] || before.has(r['uid'])) continue;
      const owner = this.kinds.find((k) => k.apiVersion === r['apiVersion'] && k.kind === r['kind']);
      if (!owner) continue;
      const a: Attributes = {
        user,
        verb: 'update',
        group: groupOf(owner.apiVersion),
        resource: owner.plural,
        subresource: 'finalizers',
        ...(next['metadata']?.namespace ? { namespace: next['metadata'].namespace } : {}),
        name: r['name'],
      };
      const denied = (x: Attributes) =>
        `${x.resource} "${next['metadata']?.name}" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: ${forbiddenMessage(x)}`;
      if (!this.authorize(res, a, denied)) return false;
    }
    return true;
  }

  // ---- HTTP --------------------------------------------------------------------------------
  private handle(req: IncomingMessage, res: ServerResponse, body: string) {
    const url = new URL(req.url ?? '/', 'http://double');
    this.requests.push(`${req.method} ${url.pathname}${url.search}`);
    const user = this.authenticate(req);
    if (!user) return status(res, 401, 'Unauthorized', 'Unauthorized');
    const parts = url.pathname.split('/').filter(Boolean);
    if (this.nonResource(res, parts)) return;
    let gv: string;
    let rest: string[];
    if (parts[0] === 'api' && parts[1] === 'v1') {
      gv = 'v1';
      rest = parts.slice(2);
    } else if (parts[0] === 'apis' && parts.length >= 3) {
      gv = `${parts[1]}/${parts[2]}`;
      rest = parts.slice(3);
    } else return status(res, 404, 'NotFound', url.pathname);
    if (rest.length === 0) {
      // Discovery is a non-resource URL every authenticated user may read (ClusterRole system:discovery).
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          kind: 'APIResourceList',
          apiVersion: 'v1',
          groupVersion: gv,
          resources: this.kinds
            .filter((k) => k.apiVersion === gv)
            .map((k) => ({
              name: k.plural,
              singularName: k.kind.toLowerCase(),
              namespaced: k.namespaced,
              kind: k.kind,
              verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'],
            })),
        }),
      );
      return;
    }
    // SubjectAccessReview: asks this double's authorizer, as kube-apiserver asks its own.
    if (gv === 'authorization.k8s.io/v1' && rest[0] === 'subjectaccessreviews' && req.method === 'POST') {
      const review = JSON.parse(body) as Obj;
      const a = review['spec']?.resourceAttributes ?? {};
      if (
        !this.authorize(res, {
          user,
          verb: 'create',
          group: 'authorization.k8s.io',
          resource: 'subjectaccessreviews',
        })
      )
        return;
      const allowed =
        review['spec']?.user === ADMIN_USER ||
        this.rbac.authorize({
          user: review['spec']?.user,
          verb: a.verb,
          group: a.group ?? '',
          resource: a.resource,
          ...(a.subresource ? { subresource: a.subresource } : {}),
          ...(a.namespace ? { namespace: a.namespace } : {}),
          ...(a.name ? { name: a.name } : {}),
        });
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ...review, status: { allowed } }));
      return;
    }
    let ns: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3) {
      ns = rest[1];
      rest = rest.slice(2);
    }
    const info = this.kinds.find((k) => k.apiVersion === gv && k.plural === rest[0]);
    if (!info) return status(res, 404, 'NotFound', `no resource ${gv} ${rest[0]}`);
    const name = rest[1];
    const sub = rest[2];
    const watching = url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1';
    const verb =
      req.method === 'GET'
        ? name
          ? 'get'
          : watching
            ? 'watch'
            : 'list'
        : req.method === 'POST'
          ? 'create'
          : req.method === 'PUT'
            ? 'update'
            : req.method === 'PATCH'
              ? 'patch'
              : req.method === 'DELETE'
                ? name
                  ? 'delete'
                  : 'deletecollection'
                : (req.method ?? '').toLowerCase();
    const fields = parseFieldSelector(url.searchParams.get('fieldSelector'));
    // kube-apiserver's request info takes the name of a list or watch from an exact `metadata.name`
    // field selector (k8s.io/apiserver endpoints/request/requestinfo.go), so RBAC `resourceNames`
    // can grant a watch of one named object, as the kubelet's watches of single ConfigMaps use.
    const selectedName =
      !name && (verb === 'list' || verb === 'watch')
        ? fields?.find((t) => t.field === 'metadata.name' && t.equal)?.value
        : undefined;
    const attrs: Attributes = {
      user,
      verb,
      group: groupOf(info.apiVersion),
      resource: info.plural,
      ...(sub ? { subresource: sub } : {}),
      ...(ns ? { namespace: ns } : {}),
      ...(name ? { name } : selectedName ? { name: selectedName } : {}),
    };
    if (!this.authorize(res, attrs)) return;
    if (fields === undefined)
      return status(
        res,
        400,
        'BadRequest',
        `field selector is not supported: only "metadata.name", "metadata.namespace"`,
      );
    const json = (code: number, o: unknown) => {
      res.writeHead(code, { 'content-type': 'application/json' });
      res.end(JSON.stringify(o));
    };

    if (req.method === 'GET' && !name) {
      const sel = parseSelector(url.searchParams.get('labelSelector'));
      if (watching) return this.watch(res, info, ns, sel, url.searchParams, fields);
      const page = this.page(url.searchParams, () =>
        this.list(info.apiVersion, info.kind).filter((o) => matches(o, ns, sel, fields)),
      );
      if (page === 'expired')
        return status(
          res,
          410,
          'Expired',
          'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.',
        );
      return json(200, {
        kind: `${info.kind}List`,
        apiVersion: info.apiVersion,
        metadata: {
          resourceVersion: page.rv,
          ...(page.continue ? { continue: page.continue, remainingItemCount: page.remaining } : {}),
        },
        items: page.items,
      });
    }
    const k = name ? key(info, info.namespaced ? ns : undefined, name) : '';
    const existing = name ? this.store.get(k) : undefined;
    const qualified = `${info.plural}.${groupOf(info.apiVersion) || 'core'}`.replace(/\.core$/, '');
    const manager =
      url.searchParams.get('fieldManager') ?? (req.headers['user-agent'] ?? 'unknown').split('/')[0] ?? 'unknown';
    if (req.method === 'GET')
      return existing ? json(200, existing) : status(res, 404, 'NotFound', `${qualified} "${name}" not found`);
    if (req.method === 'POST' && !name) {
      const o = JSON.parse(body) as Obj;
      o['apiVersion'] ??= info.apiVersion;
      o['kind'] ??= info.kind;
      o['metadata'] ??= {};
      if (!o['metadata'].name && o['metadata'].generateName)
        o['metadata'].name = `${o['metadata'].generateName}${randomUUID().slice(0, 8)}`;
      if (info.namespaced) o['metadata'].namespace = ns;
      if (this.store.has(key(info, ns, o['metadata'].name)))
        return status(res, 409, 'AlreadyExists', `${qualified} "${o['metadata'].name}" already exists`);
      if (!this.ownerRefsAllowed(res, user, undefined, o)) return;
      if (this.invalid(res, info, o) || this.oversized(res, info, o)) return;
      const created = this.write(info, undefined, o, update(undefined, o, new Map(), manager));
      return json(201, created);
    }
    if (req.method === 'PUT' && name && !sub) {
      const o = JSON.parse(body) as Obj;
      if (!existing) return status(res, 404, 'NotFound', `${qualified} "${name}" not found`);
      if (o['metadata']?.resourceVersion && o['metadata'].resourceVersion !== existing['metadata'].resourceVersion)
        return status(
          res,
          409,
          'Conflict',
          `Operation cannot be fulfilled on ${qualified} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
        );
      if (!this.ownerRefsAllowed(res, user, existing, o)) return;
      if (this.finalizerAddedWhileDeleting(res, qualified, existing, o)) return;
      if (this.invalid(res, info, o) || this.oversized(res, info, o)) return;
      const next = { ...o, apiVersion: info.apiVersion, kind: info.kind };
      return json(200, this.write(info, existing, next, update(existing, next, this.owners(k), manager)));
    }
    if (req.method === 'PATCH' && name && sub === 'status') {
      if (!existing) return status(res, 404, 'NotFound', `${qualified} "${name}" not found`);
      const patch = JSON.parse(body) as Obj;
      const next = structuredClone(existing);
      // The status subresource changes status only; spec and metadata in the body are ignored.
      next['status'] = { ...(existing['status'] ?? {}), ...patch['status'] };
      next['metadata'].resourceVersion = String(++this.rv);
      this.store.set(k, next);
      this.emit(info, 'MODIFIED', next);
      return json(200, next);
    }
    if (req.method === 'PATCH' && name && !sub) {
      const ct = req.headers['content-type'];
      if (ct !== 'application/apply-patch+yaml') return status(res, 415, 'UnsupportedMediaType', String(ct));
      this.applies.push({
        kind: info.kind,
        ...(ns ? { namespace: ns } : {}),
        name,
        fieldManager: url.searchParams.get('fieldManager'),
        force: url.searchParams.get('force'),
        contentType: ct,
      });
      if (this.failApply.has(info.kind) || this.failApplyObjects.has(`${info.kind}/${ns ?? ''}/${name}`))
        return status(res, 500, 'InternalError', `apply of ${info.kind} failed`);
      if (!url.searchParams.get('fieldManager'))
        return status(res, 422, 'Invalid', 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value');
      // An apply that creates the object is also a create (k8s.io/apiserver handlers/patch.go).
      if (!existing && !this.authorize(res, { ...attrs, verb: 'create' })) return;
      const o = JSON.parse(body) as Obj;
      if (o['metadata']?.name !== name)
        return status(res, 400, 'BadRequest', 'the name of the object does not match the name on the URL');
      if (info.namespaced) o['metadata'].namespace = ns;
      const outcome = applyFields(
        existing,
        this.owners(k),
        o,
        url.searchParams.get('fieldManager') as string,
        url.searchParams.get('force') === 'true',
      );
      if (outcome.conflicts.length > 0) {
        const n = outcome.conflicts.length;
        const list = outcome.conflicts.map((c) => `conflict with "${c.manager}" using ${info.apiVersion}: ${c.field}`);
        return status(res, 409, 'Conflict', `Apply failed with ${n} conflict${n > 1 ? 's' : ''}: ${list.join('\n')}`, {
          name,
          ...(groupOf(info.apiVersion) ? { group: groupOf(info.apiVersion) } : {}),
          kind: info.plural,
          causes: outcome.conflicts.map((c) => ({
            reason: 'FieldManagerConflict',
            message: `conflict with "${c.manager}" using ${info.apiVersion}`,
            field: c.field,
          })),
        });
      }
      const next = outcome.object;
      if (!this.ownerRefsAllowed(res, user, existing, next)) return;
      if (existing && this.finalizerAddedWhileDeleting(res, qualified, existing, next)) return;
      if (this.invalid(res, info, next) || this.oversized(res, info, next)) return;
      // A no-op apply changes nothing: same content, same owners, no new resourceVersion, no event.
      if (existing && content(existing) === content(next) && sameOwners(this.owners(k), outcome.owners))
        return json(200, existing);
      return json(existing ? 200 : 201, this.write(info, existing, next, outcome.owners));
    }
    if (req.method === 'DELETE' && name) {
      if (!existing) return status(res, 404, 'NotFound', `${qualified} "${name}" not found`);
      // Finalizers hold the object: it only gets a deletionTimestamp until they are all removed.
      if ((existing['metadata'].finalizers ?? []).length > 0) {
        if (existing['metadata'].deletionTimestamp) return json(200, existing);
        const next = structuredClone(existing);
        next['metadata'].deletionTimestamp = new Date().toISOString();
        next['metadata'].resourceVersion = String(++this.rv);
        this.store.set(k, next);
        this.emit(info, 'MODIFIED', next);
        return json(200, next);
      }
      this.remove(info.apiVersion, info.kind, info.namespaced ? ns : undefined, name);
      return json(200, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success' });
    }
    return status(res, 405, 'MethodNotAllowed', `${req.method} ${url.pathname}`);
  }
}
