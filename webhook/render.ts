/**
 * Renders the ValidatingWebhookConfiguration (pure). The Agent webhook carries one matchCondition that
 * lets the API server skip the call for Agents that cannot be affected by any denial rule: v1alpha2
 * Agents whose tool entries use only the harmless keys, that reference nothing named
 * `knowledge-retrieval`, carry no static X-Fgentic-Identity header, are not BYO-with-declarative, and are
 * not (and were not) labelled as rendered retrieval Agents. Everything else, including every v1alpha1
 * request and every evaluation error (failurePolicy Fail), goes to the webhook.
 *
 * Known blind spot, by construction: CEL cannot see RetrievalAgents, so an unlabelled, otherwise harmless
 * Agent that squats the name of a RetrievalAgent is skipped; the RetrievalAgent rule (no adoption of a
 * foreign Agent) and the reconciler's refusal to adopt unlabelled Agents cover it.
 */
import { DEFAULT_RULES_CONFIG, MANAGED_BY_LABEL, MANAGED_BY_VALUE, ROLE_LABEL } from './rules/types.ts';

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

/** Tool-entry keys that can never trigger a denial (kagent v0.9.11 Tool). */
export const HARMLESS_TOOL_KEYS = ['type', 'mcpServer', 'agent', 'headersFrom'] as const;
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

export function renderValidatingWebhookConfiguration(
  opts: Partial<RenderOptions> = {},
): Record<string, unknown> {
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
