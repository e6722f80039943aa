/**
 * Renders the ValidatingWebhookConfiguration (pure). The Agent webhook carries one matchCondition that
 * lets the API server skip the call for Agents that cannot be affected by any denial rule: v1alpha2
 * Agents whose tool entries use only the harmless keys (no Agent-as-tool), that reference nothing named
 * `knowledge-retrieval`, carry no static X-Fgentic-Identity header, are not BYO-with-declarative, and are
 * not (and were not) labelled as rendered retrieval Agents. Everything else, including every v1alpha1
 * request and every evaluation error (failurePolicy Fail), goes to the webhook.
 *
 * Known blind spot, by construction: CEL cannot see RetrievalAgents, so an unlabelled, otherwise harmless
 * Agent that squats the name of a RetrievalAgent is skipped; the RetrievalAgent rule (no adoption of a
 * foreign Agent) and the reconciler's refusal to adopt unlabelled Agents cover it.
 */
import { DEFAULT_RULES_CONFIG, KAGENT_GROUP, MANAGED_BY_LABEL, MANAGED_BY_VALUE, ROLE_LABEL } from './rules/types.ts';

export interface RenderOptions {
  namespace: string;
  service: string;
  port: number;
  path: string;
  /** cert-manager Certificate (namespace/name) whose CA is injected into the caBundle. */
  certificate: string;
  name: string;
  timeoutSeconds: number;
}

export const DEFAULT_RENDER_OPTIONS: RenderOptions = {
  namespace: 'fgentic-system',
  service: 'fgentic-webhook',
  port: 8443,
  path: '/validate',
  certificate: 'fgentic-system/fgentic-webhook-tls',
  name: 'fgentic-retrieval',
  timeoutSeconds: 5,
};

/**
 * Tool-entry keys that can never trigger a denial on their own (kagent v0.9.11 Tool). `agent` is not
 * among them: whether an Agent-as-tool target is a retrieval Agent needs the RetrievalAgents.
 */
export const HARMLESS_TOOL_KEYS = ['type', 'mcpServer', 'headersFrom'] as const;
/** mcpServer keys that can never trigger a denial; allowedHeaders/requireApproval/unknown keys are reviewed. */
export const HARMLESS_MCP_KEYS = ['apiGroup', 'kind', 'name', 'namespace', 'toolNames'] as const;

const list = (xs: readonly string[]) => `[${xs.map((x) => `'${x}'`).join(', ')}]`;

function claims(o: string): string {
  return (
    `(has(${o}.metadata) && has(${o}.metadata.labels) && ('${ROLE_LABEL}' in ${o}.metadata.labels || ` +
    `('${MANAGED_BY_LABEL}' in ${o}.metadata.labels && ${o}.metadata.labels['${MANAGED_BY_LABEL}'] == '${MANAGED_BY_VALUE}')))`
  );
}

function risky(o: string, server: string, header: string): string {
  const tool =
    `!t.all(k, k in ${list(HARMLESS_TOOL_KEYS)}) || ` +
    `(has(t.mcpServer) && (!t.mcpServer.all(k, k in ${list(HARMLESS_MCP_KEYS)}) || ` +
    `(has(t.mcpServer.name) && t.mcpServer.name == '${server}'))) || ` +
    `(has(t.headersFrom) && t.headersFrom.exists(h, has(h.name) && h.name.lowerAscii().contains('${header.toLowerCase()}')))`;
  return (
    `(has(${o}.spec) && ((has(${o}.spec.type) && ${o}.spec.type == 'BYO' && has(${o}.spec.declarative)) || ` +
    `(has(${o}.spec.declarative) && has(${o}.spec.declarative.tools) && ${o}.spec.declarative.tools.exists(t, ${tool}))))`
  );
}

/** The CEL of the Agent webhook's matchCondition: true = send to the webhook. */
export function agentMatchExpression(
  server = DEFAULT_RULES_CONFIG.retrievalServerName,
  header = DEFAULT_RULES_CONFIG.identityHeader,
): string {
  return (
    `request.kind.version != 'v1alpha2' || ` +
    `(object != null && (${claims('object')} || ${risky('object', server, header)})) || ` +
    `(oldObject != null && ${claims('oldObject')})`
  );
}

export function renderValidatingWebhookConfiguration(opts: Partial<RenderOptions> = {}): Record<string, unknown> {
  const o = { ...DEFAULT_RENDER_OPTIONS, ...opts };
  if (o.timeoutSeconds < 1 || o.timeoutSeconds > 5) throw new Error('timeoutSeconds must be 1..5');
  const common = {
    admissionReviewVersions: ['v1'],
    sideEffects: 'None',
    failurePolicy: 'Fail',
    matchPolicy: 'Equivalent',
    timeoutSeconds: o.timeoutSeconds,
    clientConfig: { service: { namespace: o.namespace, name: o.service, path: o.path, port: o.port } },
  };
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingWebhookConfiguration',
    metadata: {
      name: o.name,
      labels: {
        'app.kubernetes.io/managed-by': 'fgentic-retrieval',
        'app.kubernetes.io/part-of': 'fgentic-retrieval',
      },
      annotations: { 'cert-manager.io/inject-ca-from': o.certificate },
    },
    webhooks: [
      {
        name: 'agents.kagent.retrieval.fgentic.dev',
        ...common,
        rules: [
          {
            apiGroups: ['kagent.dev'],
            apiVersions: ['v1alpha1', 'v1alpha2'],
            resources: ['agents'],
            operations: ['CREATE', 'UPDATE', 'DELETE'],
            scope: 'Namespaced',
          },
        ],
        matchConditions: [{ name: 'may-affect-retrieval-policy', expression: agentMatchExpression() }],
      },
      {
        // No matchConditions here: the Agent condition would let every RemoteMCPServer skip the webhook.
        name: 'remotemcpservers.kagent.retrieval.fgentic.dev',
        ...common,
        rules: [
          {
            apiGroups: ['kagent.dev'],
            apiVersions: ['v1alpha2'],
            resources: ['remotemcpservers'],
            operations: ['CREATE', 'UPDATE', 'DELETE'],
            scope: 'Namespaced',
          },
        ],
      },
      {
        name: 'resources.retrieval.fgentic.dev',
        ...common,
        rules: [
          {
            apiGroups: ['retrieval.fgentic.dev'],
            apiVersions: ['v1alpha1'],
            resources: ['retrievalagents', 'retrievalrooms', 'partnerclients', 'retrievalplatforms'],
            operations: ['CREATE', 'UPDATE'],
            scope: '*',
          },
        ],
      },
    ],
  };
}

export interface PolicyOptions {
  /** The RetrievalPlatform's kagent namespace, where the retrieval RemoteMCPServer lives. */
  kagentNamespace: string;
  controllerUser: string;
  deleteUsers: readonly string[];
  name: string;
}

export const DEFAULT_POLICY_OPTIONS: PolicyOptions = {
  kagentNamespace: 'kagent',
  controllerUser: DEFAULT_RULES_CONFIG.controllerUser,
  deleteUsers: DEFAULT_RULES_CONFIG.deleteUsers,
  name: 'retrieval-agent-headers.fgentic.dev',
};

export interface PolicyValidation {
  expression: string;
  message: string;
  reason: 'Forbidden' | 'Invalid';
}

/**
 * The names the policy's expressions use: the retrieval server, the identity header, the tool, and
 * `v`, the CEL prefix of the policy's variables.
 */
function policyNames(): { server: string; header: string; tool: string; v: 'variables' } {
  return {
    server: DEFAULT_RULES_CONFIG.retrievalServerName,
    header: DEFAULT_RULES_CONFIG.identityHeader.toLowerCase(),
    tool: DEFAULT_RULES_CONFIG.retrievalTool,
    v: 'variables',
  };
}

/** The policy's variables: which side of the request is a retrieval Agent, the caller, the tools. */
function policyVariables(o: PolicyOptions): Array<{ name: string; expression: string }> {
  return [
    { name: 'isNewRetrieval', expression: `object != null && ${claims('object')}` },
    { name: 'isOldRetrieval', expression: `oldObject != null && ${claims('oldObject')}` },
    { name: 'isController', expression: `request.userInfo.username == '${o.controllerUser}'` },
    {
      name: 'tools',
      expression:
        `object != null && request.kind.version == 'v1alpha2' && has(object.spec) && has(object.spec.declarative) && ` +
        `has(object.spec.declarative.tools) ? object.spec.declarative.tools : []`,
    },
  ];
}

/** The rules for every Agent: who may change a retrieval Agent, and what no other Agent may carry. */
function everyAgentValidations(o: PolicyOptions): PolicyValidation[] {
  const { server, header, v } = policyNames();
  return [
    {
      expression:
        `!(${v}.isNewRetrieval || ${v}.isOldRetrieval) || ${v}.isController || ` +
        `(request.operation == 'DELETE' && request.userInfo.username in ${list(o.deleteUsers)})`,
      message: `only ${o.controllerUser} may change a retrieval Agent`,
      reason: 'Forbidden',
    },
    {
      expression: `!${v}.isOldRetrieval || ${v}.isNewRetrieval || request.operation == 'DELETE'`,
      message: 'a retrieval Agent cannot stop being one; delete it instead',
      reason: 'Forbidden',
    },
    {
      expression: `!(${v}.isNewRetrieval || ${v}.isOldRetrieval) || request.operation == 'DELETE' || request.kind.version == 'v1alpha2'`,
      message: 'a retrieval Agent must be written as kagent.dev/v1alpha2',
      reason: 'Invalid',
    },
    {
      expression:
        `request.kind.version != 'v1alpha1' || object == null || !has(object.spec) || !has(object.spec.tools) || ` +
        `object.spec.tools.all(t, !has(t.mcpServer) || !has(t.mcpServer.toolServer) || ` +
        `(t.mcpServer.toolServer != '${server}' && !t.mcpServer.toolServer.endsWith('/${server}')))`,
      message: `${server} may be referenced only by retrieval Agents`,
      reason: 'Forbidden',
    },
    {
      expression: `${v}.isNewRetrieval || ${v}.tools.all(t, !has(t.mcpServer) || !has(t.mcpServer.allowedHeaders))`,
      message: 'allowedHeaders is forbidden on every Agent except the rendered retrieval Agent',
      reason: 'Forbidden',
    },
    {
      expression: `${v}.isNewRetrieval || ${v}.tools.all(t, !has(t.mcpServer) || !has(t.mcpServer.name) || t.mcpServer.name != '${server}')`,
      message: `${server} may be referenced only by retrieval Agents`,
      reason: 'Forbidden',
    },
    {
      expression:
        `object == null || request.kind.version != 'v1alpha2' || !has(object.spec) || !has(object.spec.type) || ` +
        `object.spec.type != 'BYO' || !has(object.spec.declarative)`,
      message: 'spec.declarative on a BYO Agent is silently ignored by kagent; remove it',
      reason: 'Invalid',
    },
    {
      expression: `${v}.tools.all(t, !has(t.headersFrom) || t.headersFrom.all(h, !has(h.name) || h.name.trim().lowerAscii() != '${header}'))`,
      message: `a static ${DEFAULT_RULES_CONFIG.identityHeader} header would forge the projected identity`,
      reason: 'Forbidden',
    },
  ];
}

/** The rules for the shape of a retrieval Agent (v1alpha2): labels, owner, type, tool and header. */
function retrievalAgentValidations(o: PolicyOptions): PolicyValidation[] {
  const { server, header, tool, v } = policyNames();
  const retrievalOnly = (cond: string) => `!${v}.isNewRetrieval || request.kind.version != 'v1alpha2' || (${cond})`;
  return [
    {
      expression: retrievalOnly(
        `has(object.metadata.labels) && '${ROLE_LABEL}' in object.metadata.labels && ` +
          `object.metadata.labels['${ROLE_LABEL}'] == 'retrieval-agent' && '${MANAGED_BY_LABEL}' in object.metadata.labels && ` +
          `object.metadata.labels['${MANAGED_BY_LABEL}'] == '${MANAGED_BY_VALUE}'`,
      ),
      message: `a retrieval Agent must carry ${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE} and ${ROLE_LABEL}=retrieval-agent`,
      reason: 'Invalid',
    },
    {
      expression: retrievalOnly(
        `!has(object.metadata.ownerReferences) || object.metadata.ownerReferences.all(r, !has(r.kind) || r.kind != 'RetrievalAgent' || ` +
          `(has(r.name) && r.name == object.metadata.name && has(r.apiVersion) && r.apiVersion.startsWith('retrieval.fgentic.dev/')))`,
      ),
      message: 'the owner RetrievalAgent must have the Agent namespace and name',
      reason: 'Invalid',
    },
    {
      expression: retrievalOnly(
        `has(object.spec) && has(object.spec.type) && object.spec.type == 'Declarative' && !has(object.spec.byo) && ` +
          `has(object.spec.declarative) && has(object.spec.declarative.runtime) && object.spec.declarative.runtime == 'python'`,
      ),
      message: 'a retrieval Agent must be type Declarative with runtime: python set explicitly',
      reason: 'Invalid',
    },
    {
      expression: retrievalOnly(
        `!has(object.spec.declarative) || !has(object.spec.declarative.deployment) || !has(object.spec.declarative.deployment.env) || ` +
          `object.spec.declarative.deployment.env.all(e, !has(e.name) || (e.name != 'KAGENT_PROPAGATE_TOKEN' && e.name != 'STS_WELL_KNOWN_URI'))`,
      ),
      message: 'token propagation would send an Authorization header to the retrieval server',
      reason: 'Forbidden',
    },
    {
      expression: retrievalOnly(`${v}.tools.all(t, !has(t.mcpServer) || !has(t.mcpServer.requireApproval))`),
      message: 'requireApproval is forbidden on a retrieval Agent: the HITL resume turn reuses stale identity headers',
      reason: 'Forbidden',
    },
    {
      expression: retrievalOnly(
        `size(${v}.tools) == 1 && ${v}.tools.all(t, has(t.type) && t.type == 'McpServer' && !has(t.agent) && has(t.mcpServer) && ` +
          `has(t.mcpServer.kind) && t.mcpServer.kind == 'RemoteMCPServer' && has(t.mcpServer.apiGroup) && t.mcpServer.apiGroup == '${KAGENT_GROUP}' && ` +
          `has(t.mcpServer.name) && t.mcpServer.name == '${server}' && ` +
          `((has(t.mcpServer.namespace) && t.mcpServer.namespace != '') ? t.mcpServer.namespace : object.metadata.namespace) == '${o.kagentNamespace}' && ` +
          `has(t.mcpServer.toolNames) && t.mcpServer.toolNames == ['${tool}'])`,
      ),
      message: `a retrieval Agent has exactly one tool entry: McpServer on RemoteMCPServer ${o.kagentNamespace}/${server} (apiGroup ${KAGENT_GROUP}) with toolNames [${tool}]`,
      reason: 'Invalid',
    },
    {
      expression: retrievalOnly(
        `${v}.tools.all(t, !has(t.mcpServer) || !has(t.mcpServer.allowedHeaders) || ` +
          `(size(t.mcpServer.allowedHeaders) == 1 && t.mcpServer.allowedHeaders[0].lowerAscii() == '${header}'))`,
      ),
      message: `a retrieval Agent may propagate exactly one header, ${DEFAULT_RULES_CONFIG.identityHeader}`,
      reason: 'Forbidden',
    },
  ];
}

/**
 * The in-process (ValidatingAdmissionPolicy) form of the Agent rules, for clusters that prefer it to the
 * webhook. Differences, by construction of CEL admission: it cannot list RetrievalAgents, so a retrieval
 * Agent is recognised by its labels alone (only the reconciler may write labelled Agents, so the label
 * is as trustworthy as the reconciler); for the same reason it cannot deny an Agent-as-tool reference
 * to a retrieval Agent; it relies on the API server's pruning for misplaced fields; it has no
 * finalizer-only exemption; and it does not cover our own kinds' cross-object rules (keep the webhook's
 * `resources` entry for those).
 */
export function agentPolicyValidations(opts: Partial<PolicyOptions> = {}): {
  variables: Array<{ name: string; expression: string }>;
  validations: PolicyValidation[];
} {
  const o = { ...DEFAULT_POLICY_OPTIONS, ...opts };
  return {
    variables: policyVariables(o),
    validations: [...everyAgentValidations(o), ...retrievalAgentValidations(o)],
  };
}

/** ValidatingAdmissionPolicy + binding (admissionregistration.k8s.io/v1) for kagent Agents. */
export function renderValidatingAdmissionPolicy(opts: Partial<PolicyOptions> = {}): Record<string, unknown>[] {
  const o = { ...DEFAULT_POLICY_OPTIONS, ...opts };
  const { variables, validations } = agentPolicyValidations(o);
  const labels = {
    'app.kubernetes.io/managed-by': 'fgentic-retrieval',
    'app.kubernetes.io/part-of': 'fgentic-retrieval',
  };
  return [
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: o.name, labels },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: {
          matchPolicy: 'Equivalent',
          resourceRules: [
            {
              apiGroups: ['kagent.dev'],
              apiVersions: ['v1alpha1', 'v1alpha2'],
              resources: ['agents'],
              operations: ['CREATE', 'UPDATE', 'DELETE'],
              scope: 'Namespaced',
            },
          ],
        },
        variables,
        validations,
      },
    },
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name: o.name, labels },
      spec: { policyName: o.name, validationActions: ['Deny'] },
    },
  ];
}
