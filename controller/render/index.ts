/** Pure render: all our resources in, every desired object (sorted, deterministic) and the conflicts out. */

import type { Conflict, K8sObject, RenderResult, Resources } from '../types.ts';
import { analyse } from './conflicts.ts';
import { renderGatewayAgent, renderGatewayShared } from './gateway.ts';
import { renderKagentAgent, renderKagentShared } from './kagent.ts';
import { type Agent, cmpStr, type Model } from './model.ts';
import { renderAgentNetworkPolicy, renderSharedNetworkPolicies } from './network-policy.ts';
import { renderServerConfig } from './server-config.ts';

const KIND_ORDER = [
  'ConfigMap',
  'NetworkPolicy',
  'ReferenceGrant',
  'AgentgatewayBackend',
  'HTTPRoute',
  'AgentgatewayPolicy',
  'RemoteMCPServer',
  'Agent',
];

function rank(o: K8sObject): number {
  const i = KIND_ORDER.indexOf(o.kind);
  return i < 0 ? KIND_ORDER.length : i;
}

export function compareObjects(a: K8sObject, b: K8sObject): number {
  return (
    rank(a) - rank(b) ||
    cmpStr(a.kind, b.kind) ||
    cmpStr(a.metadata.namespace ?? '', b.metadata.namespace ?? '') ||
    cmpStr(a.metadata.name, b.metadata.name)
  );
}

/**
 * The objects of one retrieval Agent. They read only the platform, that RetrievalAgent and the
 * PartnerClients bound to it (`incremental.ts` keys its reuse on exactly these).
 */
export function renderAgentObjects(m: Model, a: Agent): K8sObject[] {
  return [...renderGatewayAgent(m, a), renderAgentNetworkPolicy(m, a), renderKagentAgent(a)];
}

/**
 * Everything no single Agent owns: the two configurations (which read every agent, room and
 * partner), the namespace-wide policies and the shared gateway and kagent objects. A configuration
 * over the ConfigMap limit is left out and reported in `conflicts`.
 */
export function renderSharedObjects(m: Model, conflicts: Conflict[], o: { registry?: boolean } = {}): K8sObject[] {
  // At most the agent bound: the analysis refused the RetrievalAgents past it (rules/cross-object.ts).
  const rendered = renderServerConfig(m, o);
  if (rendered.tooLarge)
    // Never a truncated registry: no projector configuration (the projector then fails closed).
    conflicts.push({
      kind: 'RetrievalPlatform',
      name: m.platformRes.metadata.name,
      reason: 'RegistryTooLarge',
      message: rendered.tooLarge,
    });
  const configs = rendered.objects;
  return [...configs, ...renderSharedNetworkPolicies(m), ...renderGatewayShared(m), ...renderKagentShared(m)];
}

export function render(input: Resources): RenderResult {
  const { model, conflicts } = analyse(input);
  if (!model) return { objects: [], conflicts };
  const objects = renderSharedObjects(model, conflicts);
  for (const a of model.agents) objects.push(...renderAgentObjects(model, a));
  return { objects: objects.sort(compareObjects), conflicts };
}
