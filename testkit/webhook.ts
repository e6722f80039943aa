/**
 * Fixture builders for tests and the benchmark: kagent Agents, our resources and AdmissionReview v1
 * requests. Each builder returns fresh JSON so a test changes exactly the field it is about.
 */
import { IDENTITY_HEADER_NAME, RETRIEVAL_SERVER, RETRIEVAL_TOOL } from '../rules/index.ts';
import { makeAdmissionReview } from '../webhook/review.ts';
import { CONTROLLER_USER, type KubeObject, type Operation } from '../webhook/rules/types.ts';

export const KAGENT_NS = 'kagent';

/** A RetrievalPlatform that passes the CRD schema (the fields the rules read come first). */
export function platform(kagentNamespace = KAGENT_NS, localGroups: string[] = ['staff']): KubeObject {
  return {
    apiVersion: 'retrieval.fgentic.dev/v1alpha1',
    kind: 'RetrievalPlatform',
    metadata: { name: 'default' },
    spec: {
      namespaces: { retrieval: 'knowledge', kagent: kagentNamespace, gateway: 'agentgateway-system' },
      localGroups,
      gateway: {
        name: 'agentgateway-proxy',
        namespace: 'agentgateway-system',
        localListener: 'default',
        mcpListener: 'default',
        mcpUrl: 'http://agentgateway-proxy.agentgateway-system.svc.cluster.local:8080',
      },
      bridge: {
        workload: 'matrix-a2a-bridge',
        apiKeySecretRef: { name: 'a2a-bridge-callers', key: 'matrix-a2a-bridge' },
        localServer: 'org-a.example',
        serviceUserRegex: '^@a2a-bridge:org-a\\.example$',
      },
      embeddings: {
        url: 'http://agentgateway-proxy.agentgateway-system.svc.cluster.local:8082/v1/embeddings',
        model: 'BAAI/bge-m3',
        profile: 'bge-m3-1024-v1',
      },
    },
  };
}

export function retrievalAgentCr(name = 'knowledge-agent', namespace = KAGENT_NS): KubeObject {
  return {
    apiVersion: 'retrieval.fgentic.dev/v1alpha1',
    kind: 'RetrievalAgent',
    metadata: { name, namespace, uid: `ra-${namespace}-${name}` },
    spec: {
      description: 'answers from the knowledge base',
      modelConfig: 'agentgateway-model',
      systemMessage: 'hi',
      mcpApiKeySecretRef: { name: `${name}-mcp-credential`, key: 'authorization' },
    },
  };
}

/** The Agent the reconciler renders for a RetrievalAgent. */
export function retrievalAgent(name = 'knowledge-agent', namespace = KAGENT_NS): KubeObject {
  return {
    apiVersion: 'kagent.dev/v1alpha2',
    kind: 'Agent',
    metadata: {
      name,
      namespace,
      labels: {
        'app.kubernetes.io/managed-by': 'fgentic-retrieval',
        'app.kubernetes.io/part-of': 'fgentic-retrieval',
        'retrieval.fgentic.dev/role': 'retrieval-agent',
      },
      ownerReferences: [
        {
          apiVersion: 'retrieval.fgentic.dev/v1alpha1',
          kind: 'RetrievalAgent',
          name,
          uid: `ra-${namespace}-${name}`,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      type: 'Declarative',
      description: 'answers from the knowledge base',
      declarative: {
        runtime: 'python',
        modelConfig: 'agentgateway-model',
        systemMessage: 'Answer from the knowledge base.',
        tools: [
          {
            type: 'McpServer',
            mcpServer: {
              apiGroup: 'kagent.dev',
              kind: 'RemoteMCPServer',
              name: RETRIEVAL_SERVER,
              namespace: KAGENT_NS,
              toolNames: [RETRIEVAL_TOOL],
              allowedHeaders: [IDENTITY_HEADER_NAME],
            },
            headersFrom: [
              {
                name: 'Authorization',
                valueFrom: { type: 'Secret', name: `${name}-mcp-key`, key: 'authorization' },
              },
            ],
          },
        ],
      },
    },
  };
}

/** An ordinary Declarative Agent with one tool on some other RemoteMCPServer. */
export function plainAgent(name = 'helper', namespace = 'team-a'): KubeObject {
  return {
    apiVersion: 'kagent.dev/v1alpha2',
    kind: 'Agent',
    metadata: { name, namespace },
    spec: {
      type: 'Declarative',
      declarative: {
        runtime: 'python',
        modelConfig: 'model',
        systemMessage: 'hi',
        tools: [
          {
            type: 'McpServer',
            mcpServer: { apiGroup: 'kagent.dev', kind: 'RemoteMCPServer', name: 'tools', toolNames: ['get'] },
          },
        ],
      },
    },
  };
}

export function v1alpha1Agent(name = 'old', namespace = 'team-a', toolServer = 'tools'): KubeObject {
  return {
    apiVersion: 'kagent.dev/v1alpha1',
    kind: 'Agent',
    metadata: { name, namespace },
    spec: {
      description: 'old layout',
      modelConfig: 'model',
      systemMessage: 'hi',
      tools: [{ type: 'McpServer', mcpServer: { toolServer, toolNames: ['get'] } }],
    },
  };
}

export function room(name: string, roomId: string, extra: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: 'retrieval.fgentic.dev/v1alpha1',
    kind: 'RetrievalRoom',
    metadata: { name },
    spec: { roomId, allowedClassifications: ['public'], ...extra } as KubeObject,
  };
}

export function partner(name: string, extra: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: 'retrieval.fgentic.dev/v1alpha1',
    kind: 'PartnerClient',
    metadata: { name },
    spec: {
      issuer: 'https://issuer.example',
      audience: 'fgentic-a2a',
      azp: 'org-b-a2a',
      policyId: 'org-b',
      groups: ['partner/org-b/docs'],
      allowedClassifications: ['public'],
      agents: [{ namespace: KAGENT_NS, name: 'knowledge-agent' }],
      ...extra,
    } as KubeObject,
  };
}

export interface ReviewOptions {
  operation?: Operation;
  user?: string;
  oldObject?: KubeObject | null;
  uid?: string;
}

let counter = 0;

/** An AdmissionReview v1 request for `object` (for DELETE pass null and the object as `oldObject`). */
export function admissionReview(object: KubeObject | null, opts: ReviewOptions = {}): Record<string, unknown> {
  return makeAdmissionReview(object, {
    operation: opts.operation ?? 'CREATE',
    username: opts.user ?? 'alice@example.com',
    oldObject: opts.oldObject ?? null,
    uid: opts.uid ?? `00000000-0000-4000-8000-${String(++counter).padStart(12, '0')}`,
  });
}

export const CONTROLLER = CONTROLLER_USER;

export function clone<T>(v: T): T {
  return structuredClone(v);
}
