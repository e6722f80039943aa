/**
 * Test double: a small kube-apiserver over node:http, faithful to what the controller uses (Kubernetes API
 * conventions): discovery (`/api/v1`, `/apis/<g>/<v>` APIResourceLists), LIST with label selectors,
 * WATCH streams (newline-delimited `{type, object}`; synthetic ADDED on start without resourceVersion),
 * GET, POST (generateName), PUT with resourceVersion conflicts (409), server-side apply PATCH
 * (`application/apply-patch+yaml`, `fieldManager`, `force`; a no-op apply changes nothing and emits no
 * event; `metadata.generation` bumps when `spec` changes), merge-patch on `/status`, DELETE.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import * as k8s from '@kubernetes/client-node';

interface KindInfo {
  apiVersion: string;
  kind: string;
  plural: string;
  namespaced: boolean;
}

type Obj = Record<string, any>;

const KINDS: KindInfo[] = [
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
    apiVersion: 'agentgateway.dev/v1alpha1',
    kind: 'AgentgatewayBackend',
    plural: 'agentgatewaybackends',
    namespaced: true,
  },
  {
    apiVersion: 'agentgateway.dev/v1alpha1',
    kind: 'AgentgatewayPolicy',
    plural: 'agentgatewaypolicies',
    namespaced: true,
  },
  {
    apiVersion: 'kagent.dev/v1alpha2',
    kind: 'RemoteMCPServer',
    plural: 'remotemcpservers',
    namespaced: true,
  },
  { apiVersion: 'kagent.dev/v1alpha2', kind: 'Agent', plural: 'agents', namespaced: true },
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
  res: ServerResponse;
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

function status(res: ServerResponse, code: number, reason: string, message: string) {
  res.writeHead(code, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message }));
}

function parseSelector(s: string | null): [string, string][] {
  if (!s) return [];
  return s.split(',').map((p) => {
    const [k, v] = p.split('=');
    return [k as string, v ?? ''];
  });
}

function matches(o: Obj, ns: string | undefined, sel: [string, string][]): boolean {
  if (ns && o['metadata'].namespace !== ns) return false;
  const labels = o['metadata'].labels ?? {};
  return sel.every(([k, v]) => labels[k] === v);
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
  private watchers = new Set<Watcher>();
  private rv = 100;
  private server?: Server;
  readonly applies: ApplyRecord[] = [];
  readonly requests: string[] = [];
  /** Kinds whose server-side apply fails with 500 (fault injection). */
  readonly failApply = new Set<string>();
  port = 0;

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        try {
          this.handle(req, res, body);
        } catch (e) {
          status(res, 500, 'InternalError', (e as Error).message);
        }
      });
    });
    await new Promise<void>((r) => this.server?.listen(0, '127.0.0.1', r));
    const a = this.server.address();
    this.port = typeof a === 'object' && a ? a.port : 0;
    return this;
  }

  async stop(): Promise<void> {
    for (const w of this.watchers) w.res.end();
    this.watchers.clear();
    this.server?.closeAllConnections();
    await new Promise<void>((r) => this.server?.close(() => r()));
  }

  kubeConfig(): k8s.KubeConfig {
    const kc = new k8s.KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'double', server: `http://127.0.0.1:${this.port}`, skipTLSVerify: true }],
      users: [{ name: 'controller', token: 'test-token' }],
      contexts: [{ name: 'double', cluster: 'double', user: 'controller' }],
      currentContext: 'double',
    });
    return kc;
  }

  // ---- direct store access for tests ---------------------------------------------------------
  private info(apiVersion: string, kind: string): KindInfo {
    const i = KINDS.find((k) => k.apiVersion === apiVersion && k.kind === kind);
    if (!i) throw new Error(`unknown kind ${apiVersion} ${kind}`);
    return i;
  }

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
        ? prev['metadata'].generation +
          (JSON.stringify(prev['spec']) !== JSON.stringify(next['spec']) ? 1 : 0)
        : 1,
      resourceVersion: String(++this.rv),
    };
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
    return [...this.store.values()].filter(
      (o) => o['apiVersion'] === info.apiVersion && o['kind'] === info.kind,
    );
  }

  remove(apiVersion: string, kind: string, namespace: string | undefined, name: string): boolean {
    const info = this.info(apiVersion, kind);
    const k = key(info, namespace, name);
    const o = this.store.get(k);
    if (!o) return false;
    this.store.delete(k);
    this.emit(info, 'DELETED', o);
    return true;
  }

  private emit(info: KindInfo, type: string, obj: Obj) {
    for (const w of this.watchers)
      if (w.info === info && matches(obj, w.namespace, w.selector))
        w.res.write(`${JSON.stringify({ type, object: obj })}\n`);
  }

  // ---- HTTP --------------------------------------------------------------------------------
  private handle(req: IncomingMessage, res: ServerResponse, body: string) {
    const url = new URL(req.url ?? '/', 'http://double');
    this.requests.push(`${req.method} ${url.pathname}${url.search}`);
    const parts = url.pathname.split('/').filter(Boolean);
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
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          kind: 'APIResourceList',
          apiVersion: 'v1',
          groupVersion: gv,
          resources: KINDS.filter((k) => k.apiVersion === gv).map((k) => ({
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
    let ns: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3) {
      ns = rest[1];
      rest = rest.slice(2);
    }
    const info = KINDS.find((k) => k.apiVersion === gv && k.plural === rest[0]);
    if (!info) return status(res, 404, 'NotFound', `no resource ${gv} ${rest[0]}`);
    const name = rest[1];
    const sub = rest[2];
    const json = (code: number, o: unknown) => {
      res.writeHead(code, { 'content-type': 'application/json' });
      res.end(JSON.stringify(o));
    };

    if (req.method === 'GET' && !name) {
      const sel = parseSelector(url.searchParams.get('labelSelector'));
      if (url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1') {
        res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
        // kube-apiserver sends the watch response headers at once; a client waits for them.
        res.flushHeaders();
        const w: Watcher = { info, ...(ns ? { namespace: ns } : {}), selector: sel, res };
        if (!url.searchParams.get('resourceVersion'))
          for (const o of this.list(info.apiVersion, info.kind))
            if (matches(o, ns, sel)) res.write(`${JSON.stringify({ type: 'ADDED', object: o })}\n`);
        this.watchers.add(w);
        res.on('close', () => this.watchers.delete(w));
        return;
      }
      const items = this.list(info.apiVersion, info.kind).filter((o) => matches(o, ns, sel));
      return json(200, {
        kind: `${info.kind}List`,
        apiVersion: info.apiVersion,
        metadata: { resourceVersion: String(this.rv) },
        items,
      });
    }
    const k = name ? key(info, info.namespaced ? ns : undefined, name) : '';
    const existing = name ? this.store.get(k) : undefined;
    if (req.method === 'GET')
      return existing
        ? json(200, existing)
        : status(res, 404, 'NotFound', `${info.plural} "${name}" not found`);
    if (req.method === 'POST' && !name) {
      const o = JSON.parse(body) as Obj;
      o['apiVersion'] ??= info.apiVersion;
      o['kind'] ??= info.kind;
      o['metadata'] ??= {};
      if (!o['metadata'].name && o['metadata'].generateName)
        o['metadata'].name = `${o['metadata'].generateName}${randomUUID().slice(0, 8)}`;
      if (info.namespaced) o['metadata'].namespace = ns;
      if (this.store.has(key(info, ns, o['metadata'].name)))
        return status(res, 409, 'AlreadyExists', 'exists');
      return json(201, this.put(o));
    }
    if (req.method === 'PUT' && name) {
      const o = JSON.parse(body) as Obj;
      if (!existing) return status(res, 404, 'NotFound', name);
      if (
        o['metadata']?.resourceVersion &&
        o['metadata'].resourceVersion !== existing['metadata'].resourceVersion
      )
        return status(res, 409, 'Conflict', 'the object has been modified');
      return json(200, this.put({ ...o, apiVersion: info.apiVersion, kind: info.kind }));
    }
    if (req.method === 'PATCH' && name && sub === 'status') {
      if (!existing) return status(res, 404, 'NotFound', name);
      const patch = JSON.parse(body) as Obj;
      const next = structuredClone(existing);
      next['status'] = { ...(existing['status'] ?? {}), ...patch['status'] };
      next['metadata'].resourceVersion = String(++this.rv);
      this.store.set(k, next);
      this.emit(info, 'MODIFIED', next);
      return json(200, next);
    }
    if (req.method === 'PATCH' && name) {
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
      if (this.failApply.has(info.kind))
        return status(res, 500, 'InternalError', `apply of ${info.kind} failed`);
      if (!url.searchParams.get('fieldManager'))
        return status(res, 422, 'Invalid', 'fieldManager is required');
      const o = JSON.parse(body) as Obj;
      if (o['metadata']?.name !== name) return status(res, 400, 'BadRequest', 'name mismatch');
      if (existing && content(existing) === content(o)) return json(200, existing);
      return json(
        existing ? 200 : 201,
        this.put({ ...o, ...(existing?.['status'] ? { status: existing['status'] } : {}) }),
      );
    }
    if (req.method === 'DELETE' && name) {
      if (!existing) return status(res, 404, 'NotFound', name);
      this.remove(info.apiVersion, info.kind, info.namespaced ? ns : undefined, name);
      return json(200, { kind: 'Status', apiVersion: 'v1', status: 'Success' });
    }
    return status(res, 405, 'MethodNotAllowed', `${req.method} ${url.pathname}`);
  }
}
