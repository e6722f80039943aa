/**
 * The checks a real cluster runs (npm run test:cluster), as data and argument builders with no I/O, so
 * the same logic also runs in the normal test suite against the API-server double (cluster/checks.test.ts).
 *
 * - Access: every grant of the shipped RBAC must be allowed for its ServiceAccount, and a fixed list of
 *   the rights that would break least privilege must be refused (`kubectl auth can-i ... --as`).
 * - Bypass: a probe pod outside the gateway must not reach the retrieval server or the projector
 *   directly (NetworkPolicy under an enforcing CNI).
 */
import { RbacAuthorizer, serviceAccountUser } from '../testkit/controller/rbac.ts';

export interface AccessCheck {
  name: string;
  user: string;
  verb: string;
  group: string;
  resource: string;
  subresource?: string;
  namespace?: string;
  resourceName?: string;
  expect: boolean;
}

const CONTROLLER = serviceAccountUser('fgentic-system', 'fgentic-retrieval-controller');
const WEBHOOK = serviceAccountUser('fgentic-system', 'fgentic-retrieval-webhook');
const PROJECTOR = serviceAccountUser('knowledge', 'fgentic-projector');
const RETRIEVAL = serviceAccountUser('knowledge', 'knowledge-retrieval');

/** Rights no component may hold, whatever the RBAC table says. */
const MUST_REFUSE: Omit<AccessCheck, 'name' | 'expect'>[] = [
  { user: CONTROLLER, verb: 'list', group: '', resource: 'secrets' },
  {
    user: CONTROLLER,
    verb: 'get',
    group: '',
    resource: 'secrets',
    namespace: 'kagent',
    resourceName: 'model-provider-key',
  },
  {
    user: CONTROLLER,
    verb: 'get',
    group: '',
    resource: 'secrets',
    namespace: 'agentgateway-system',
    // The gateway's own API-key Secret; the controller reads only its mirrors there, by name.
    resourceName: 'a2a-bridge-callers',
  },
  { user: CONTROLLER, verb: 'list', group: '', resource: 'secrets', namespace: 'agentgateway-system' },
  // The gateway's own Secrets (bridge API key, TLS): a PATCH answers with the whole object.
  {
    user: CONTROLLER,
    verb: 'patch',
    group: '',
    resource: 'secrets',
    namespace: 'agentgateway-system',
    resourceName: 'a2a-bridge-callers',
  },
  {
    user: CONTROLLER,
    verb: 'delete',
    group: '',
    resource: 'secrets',
    namespace: 'agentgateway-system',
    resourceName: 'a2a-bridge-callers',
  },
  // ConfigMaps only in the retrieval namespace: a labelled one elsewhere is not the controller's.
  { user: CONTROLLER, verb: 'list', group: '', resource: 'configmaps' },
  {
    user: CONTROLLER,
    verb: 'delete',
    group: '',
    resource: 'configmaps',
    namespace: 'default',
    resourceName: 'x',
  },
  {
    user: CONTROLLER,
    verb: 'update',
    group: 'retrieval.fgentic.dev',
    resource: 'retrievalagents',
    namespace: 'kagent',
  },
  { user: CONTROLLER, verb: 'update', group: 'kagent.dev', resource: 'agents', namespace: 'kagent' },
  { user: CONTROLLER, verb: 'create', group: '', resource: 'pods', namespace: 'kagent' },
  { user: WEBHOOK, verb: 'create', group: 'retrieval.fgentic.dev', resource: 'retrievalrooms' },
  {
    user: WEBHOOK,
    verb: 'get',
    group: '',
    resource: 'secrets',
    namespace: 'kagent',
    resourceName: 'knowledge-agent-mcp-credential',
  },
  // The projector reads its own configuration ConfigMaps only: nowhere else, never Secrets, never writes.
  { user: PROJECTOR, verb: 'list', group: '', resource: 'configmaps', namespace: 'kagent' },
  { user: PROJECTOR, verb: 'watch', group: '', resource: 'configmaps' },
  { user: PROJECTOR, verb: 'get', group: '', resource: 'secrets', namespace: 'knowledge' },
  { user: PROJECTOR, verb: 'patch', group: '', resource: 'configmaps', namespace: 'knowledge' },
  {
    user: RETRIEVAL,
    verb: 'get',
    group: '',
    resource: 'secrets',
    namespace: 'knowledge',
    resourceName: 'pg-knowledge-retrieval',
  },
];

/** Every grant of the RBAC table (expected allowed) plus the must-refuse list (expected refused). */
export function accessChecks(rbac: RbacAuthorizer): AccessCheck[] {
  const out: AccessCheck[] = [];
  for (const user of [CONTROLLER, WEBHOOK, PROJECTOR, RETRIEVAL])
    for (const g of rbac.grants(user)) {
      const [resource, subresource] = g.resource.split('/') as [string, string | undefined];
      out.push({
        name: `${user.split(':').pop()} may ${g.verb} ${g.resource}${g.resourceName ? ` ${g.resourceName}` : ''} ${g.namespace ? `in ${g.namespace}` : 'cluster-wide'}`,
        user,
        verb: g.verb,
        group: g.group,
        resource,
        ...(subresource ? { subresource } : {}),
        ...(g.namespace ? { namespace: g.namespace } : {}),
        ...(g.resourceName ? { resourceName: g.resourceName } : {}),
        expect: true,
      });
    }
  for (const c of MUST_REFUSE)
    out.push({
      ...c,
      name: `${c.user.split(':').pop()} may not ${c.verb} ${c.resource}${c.resourceName ? ` ${c.resourceName}` : ''} ${c.namespace ? `in ${c.namespace}` : 'cluster-wide'}`,
      expect: false,
    });
  return out;
}

/** `kubectl auth can-i` arguments for one check (exit 0 = yes, 1 = no). */
export function canIArgs(c: AccessCheck): string[] {
  const res = `${c.resource}${c.group ? `.${c.group}` : ''}`;
  return [
    'auth',
    'can-i',
    c.verb,
    c.resourceName ? `${res}/${c.resourceName}` : res,
    ...(c.subresource ? [`--subresource=${c.subresource}`] : []),
    ...(c.namespace ? ['-n', c.namespace] : ['--all-namespaces']),
    '--as',
    c.user,
  ];
}

/** The SubjectAccessReview the same question becomes (what kubectl auth can-i --as asks the API). */
export function subjectAccessReview(c: AccessCheck): Record<string, unknown> {
  return {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SubjectAccessReview',
    spec: {
      user: c.user,
      resourceAttributes: {
        verb: c.verb,
        group: c.group,
        resource: c.resource,
        ...(c.subresource ? { subresource: c.subresource } : {}),
        ...(c.namespace ? { namespace: c.namespace } : {}),
        ...(c.resourceName ? { name: c.resourceName } : {}),
      },
    },
  };
}

export interface BypassProbe {
  name: string;
  namespace: string;
  url: string;
}

/** Direct calls that skip the gateway; each must time out or be refused under the NetworkPolicies. */
export function bypassProbes(): BypassProbe[] {
  return [
    {
      name: 'an Agent-namespace pod cannot call the retrieval server directly',
      namespace: 'kagent',
      url: 'http://knowledge-retrieval.knowledge.svc.cluster.local:8080/mcp',
    },
    {
      name: 'a default-namespace pod cannot call the retrieval server directly',
      namespace: 'default',
      url: 'http://knowledge-retrieval.knowledge.svc.cluster.local:8080/mcp',
    },
    {
      name: 'a default-namespace pod cannot call the projector directly',
      namespace: 'default',
      url: 'http://fgentic-projector.knowledge.svc.cluster.local:8080/',
    },
  ];
}

/** A short-lived probe pod that exits 0 only if the URL answered (so "refused" is a non-zero exit). */
export function probePod(p: BypassProbe, index: number): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `fgentic-bypass-probe-${index}`,
      namespace: p.namespace,
      labels: { 'app.kubernetes.io/name': 'fgentic-bypass-probe' },
    },
    spec: {
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      securityContext: { runAsNonRoot: true, runAsUser: 65534, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: 'probe',
          image: 'curlimages/curl:8.11.1',
          args: ['--silent', '--max-time', '5', '--output', '/dev/null', p.url],
          securityContext: {
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            capabilities: { drop: ['ALL'] },
          },
        },
      ],
    },
  };
}

export { RbacAuthorizer };
