/**
 * Test-only: the RBAC authorizer of kube-apiserver (rbac.authorization.k8s.io/v1), over the
 * ServiceAccounts, Roles, ClusterRoles and their bindings that deploy/ ships. Semantics follow the
 * upstream RBAC authorizer (kubernetes/plugin/pkg/auth/authorizer/rbac): a ClusterRoleBinding grants
 * its ClusterRole everywhere; a RoleBinding grants its Role or ClusterRole in its own namespace only;
 * a rule matches when verb, API group, resource (`resource/subresource` for a subresource) and, if the
 * rule lists `resourceNames`, the request's name all match (a request without a name, such as list,
 * watch or create, never matches a rule with resourceNames). Only allow rules exist; no match denies.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseAllDocuments } from 'yaml';

export interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

/** One authorization request, as the apiserver derives it from an HTTP request. */
export interface Attributes {
  user: string;
  verb: string;
  group: string;
  resource: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}

/** One grant: a single verb on a single resource from one rule, in one scope. */
export interface Grant {
  source: string;
  /** Namespace the grant applies in; undefined = every namespace and the cluster scope. */
  namespace?: string;
  verb: string;
  group: string;
  resource: string;
  resourceName?: string;
}

type Obj = Record<string, any>;

export const serviceAccountUser = (namespace: string, name: string) => `system:serviceaccount:${namespace}:${name}`;

/** Every YAML document of a kustomization's `resources` (files and directories, recursively). */
export function kustomizeDocs(dir: string): Obj[] {
  const k = parseAllDocuments(readFileSync(join(dir, 'kustomization.yaml'), 'utf8'))[0]?.toJS() as Obj;
  const out: Obj[] = [];
  for (const r of (k?.['resources'] ?? []) as string[]) {
    const p = join(dir, r);
    if (!/\.ya?ml$/.test(r)) {
      out.push(...kustomizeDocs(p));
      continue;
    }
    for (const d of parseAllDocuments(readFileSync(p, 'utf8'))) {
      const o = d.toJS() as Obj | null;
      if (o) out.push(o);
    }
  }
  return out;
}

const RBAC = 'rbac.authorization.k8s.io/v1';

export class RbacAuthorizer {
  private roles = new Map<string, Rule[]>();
  private bindings: { namespace?: string; roleKey: string; subjects: Obj[]; source: string }[] = [];
  readonly serviceAccounts = new Set<string>();

  constructor(docs: Obj[]) {
    for (const o of docs) {
      const ns = o['metadata']?.namespace as string | undefined;
      const name = o['metadata']?.name as string;
      if (o['apiVersion'] === 'v1' && o['kind'] === 'ServiceAccount')
        this.serviceAccounts.add(serviceAccountUser(ns as string, name));
      if (o['apiVersion'] !== RBAC) continue;
      if (o['kind'] === 'ClusterRole') this.roles.set(`ClusterRole//${name}`, o['rules'] ?? []);
      if (o['kind'] === 'Role') this.roles.set(`Role/${ns}/${name}`, o['rules'] ?? []);
      if (o['kind'] === 'ClusterRoleBinding' || o['kind'] === 'RoleBinding') {
        const ref = o['roleRef'] as Obj;
        const roleKey = ref['kind'] === 'ClusterRole' ? `ClusterRole//${ref['name']}` : `Role/${ns}/${ref['name']}`;
        this.bindings.push({
          ...(o['kind'] === 'RoleBinding' ? { namespace: ns } : {}),
          roleKey,
          subjects: o['subjects'] ?? [],
          source: `${o['kind']} ${ns ? `${ns}/` : ''}${name}`,
        });
      }
    }
  }

  /** The RBAC of a kustomize directory (deploy/base), plus optional Components next to it. */
  static fromKustomize(dir: string, components: string[] = []): RbacAuthorizer {
    const docs = kustomizeDocs(dir);
    for (const c of components) docs.push(...kustomizeDocs(join(dirname(dir), 'components', c)));
    return new RbacAuthorizer(docs);
  }

  /**
   * The RBAC of a kustomize directory with more names on the Secret rules of some Roles, as the
   * operator's overlay adds one MCP key Secret and one mirror name per RetrievalAgent
   * (deploy/README.md "RBAC"). `names` maps `namespace/role` to the names to add.
   */
  static fromKustomizeWithNames(dir: string, names: Record<string, string[]>): RbacAuthorizer {
    const docs = kustomizeDocs(dir);
    for (const o of docs) {
      if (o['kind'] !== 'Role') continue;
      const extra = names[`${o['metadata']?.namespace}/${o['metadata']?.name}`];
      if (!extra) continue;
      for (const r of o['rules'] ?? [])
        if (r.resources?.includes('secrets')) r.resourceNames = [...(r.resourceNames ?? []), ...extra];
    }
    return new RbacAuthorizer(docs);
  }

  private subjectMatches(s: Obj, user: string): boolean {
    if (s['kind'] === 'ServiceAccount') return user === serviceAccountUser(s['namespace'], s['name']);
    if (s['kind'] === 'User') return user === s['name'];
    if (s['kind'] === 'Group') {
      const m = /^system:serviceaccount:([^:]+):/.exec(user);
      return (
        s['name'] === 'system:authenticated' ||
        (m !== null && (s['name'] === 'system:serviceaccounts' || s['name'] === `system:serviceaccounts:${m[1]}`))
      );
    }
    return false;
  }

  /** Every single-verb grant the shipped RBAC gives this user. */
  grants(user: string): Grant[] {
    const out: Grant[] = [];
    for (const b of this.bindings) {
      if (!b.subjects.some((s) => this.subjectMatches(s, user))) continue;
      const rules = this.roles.get(b.roleKey);
      if (!rules) continue; // a binding to a missing role grants nothing, as upstream
      for (const r of rules)
        for (const verb of r.verbs)
          for (const group of r.apiGroups)
            for (const resource of r.resources)
              for (const resourceName of r.resourceNames?.length ? r.resourceNames : [undefined])
                out.push({
                  source: `${b.source} → ${b.roleKey.replace('//', '/')}`,
                  ...(b.namespace ? { namespace: b.namespace } : {}),
                  verb,
                  group,
                  resource,
                  ...(resourceName ? { resourceName } : {}),
                });
    }
    return out;
  }

  static covers(g: Grant, a: Attributes): boolean {
    const resource = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
    const wild = (x: string, v: string) => x === '*' || x === v;
    if (!wild(g.verb, a.verb) || !wild(g.group, a.group) || !wild(g.resource, resource)) return false;
    if (g.resourceName !== undefined && g.resourceName !== a.name) return false;
    if (g.namespace !== undefined && g.namespace !== a.namespace) return false;
    return true;
  }

  authorize(a: Attributes): boolean {
    return this.grants(a.user).some((g) => RbacAuthorizer.covers(g, a));
  }
}

/**
 * kube-apiserver's Forbidden message (k8s.io/apiserver endpoints/handlers/responsewriters
 * `forbiddenMessage` wrapped by apimachinery `NewForbidden`).
 */
export function forbiddenMessage(a: Attributes): string {
  const resource = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const scope = a.namespace ? `in the namespace "${a.namespace}"` : 'at the cluster scope';
  const who = `User "${a.user}" cannot ${a.verb} resource "${resource}" in API group "${a.group}" ${scope}`;
  const qualified = a.group ? `${a.resource}.${a.group}` : a.resource;
  return a.name ? `${qualified} "${a.name}" is forbidden: ${who}` : `${qualified} is forbidden: ${who}`;
}

/** Grants that no recorded (allowed) request used: each one is wider than the component needs. */
export function unusedGrants(rbac: RbacAuthorizer, user: string, calls: Attributes[]): Grant[] {
  const mine = calls.filter((c) => c.user === user);
  return rbac.grants(user).filter((g) => !mine.some((c) => RbacAuthorizer.covers(g, c)));
}
