/**
 * kagent v0.9.11 objects: the `knowledge-retrieval` RemoteMCPServer per Agent namespace (pointing at the
 * gateway's MCP route) and the whole retrieval Agent, so that nobody hand-edits the one kind of Agent
 * allowed to propagate a header (docs/upstream.md#kagent-agent-crd, docs/decisions.md#adr-10, docs/decisions.md#d6-python-runtime).
 */

import { IDENTITY_HEADER_NAME } from '../../rules/index.ts';
import type { K8sObject } from '../types.ts';
import { HEADER } from './cel.ts';
import {
  AGENT_POD_LABEL,
  type Agent,
  agentOwner,
  MCP_ROUTE_PATH,
  MCP_TOOL,
  type Model,
  meta,
  platformOwner,
  REMOTE_MCP_SERVER,
  ROLE_LABEL,
  workloadOf,
} from './model.ts';

const KAGENT = 'kagent.dev/v1alpha2';

function remoteMcpServer(m: Model, namespace: string): K8sObject {
  return {
    apiVersion: KAGENT,
    kind: 'RemoteMCPServer',
    metadata: meta(REMOTE_MCP_SERVER, namespace, platformOwner(m.platform)),
    spec: {
      description: 'Permission-aware knowledge retrieval (search_knowledge) through agentgateway',
      url: `${m.platform.mcpUrl}${MCP_ROUTE_PATH}`,
      protocol: 'STREAMABLE_HTTP',
      timeout: '30s',
      terminateOnClose: true,
    },
  };
}

function agent(a: Agent): K8sObject {
  const s = a.res.spec;
  const skills = (s.skills ?? []).map((k) => ({
    id: k.id,
    name: k.name,
    ...(k.description ? { description: k.description } : {}),
    ...(k.tags?.length ? { tags: [...k.tags] } : {}),
  }));
  return {
    apiVersion: KAGENT,
    kind: 'Agent',
    metadata: meta(a.name, a.namespace, agentOwner(a), { [ROLE_LABEL]: 'retrieval-agent' }),
    spec: {
      type: 'Declarative',
      ...(s.description ? { description: s.description } : {}),
      declarative: {
        runtime: 'python',
        modelConfig: s.modelConfig,
        systemMessage: s.systemMessage,
        tools: [
          {
            type: 'McpServer',
            mcpServer: {
              apiGroup: 'kagent.dev',
              kind: 'RemoteMCPServer',
              name: REMOTE_MCP_SERVER,
              toolNames: [MCP_TOOL],
              allowedHeaders: [IDENTITY_HEADER_NAME],
            },
            headersFrom: [
              {
                name: 'Authorization',
                valueFrom: { type: 'Secret', name: s.mcpApiKeySecretRef.name, key: s.mcpApiKeySecretRef.key },
              },
              // Selects this Agent's own MCP route (and rate-limit bucket); the API key must match it.
              { name: HEADER.retrievalAgent, value: workloadOf(a) },
            ],
          },
        ],
        ...(skills.length ? { a2aConfig: { skills } } : {}),
        deployment: { labels: { [AGENT_POD_LABEL]: a.name } },
      },
    },
  };
}

/** The RemoteMCPServer of every namespace that holds a retrieval Agent. */
export function renderKagentShared(m: Model): K8sObject[] {
  return [...new Set(m.agents.map((a) => a.namespace))].sort().map((ns) => remoteMcpServer(m, ns));
}

/** The kagent Agent of one RetrievalAgent (it reads that resource only). */
export function renderKagentAgent(a: Agent): K8sObject {
  return agent(a);
}

export function renderKagent(m: Model): K8sObject[] {
  return [...renderKagentShared(m), ...m.agents.map(agent)];
}
