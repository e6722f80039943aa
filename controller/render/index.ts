/** Pure render: all our resources in, every desired object (sorted, deterministic) and the conflicts out. */
import type { K8sObject, RenderResult, Resources } from '../types.ts';
import { analyse } from './conflicts.ts';
import { renderGateway } from './gateway.ts';
import { renderKagent } from './kagent.ts';
import { cmpStr } from './model.ts';
import { renderNetworkPolicies } from './network-policy.ts';
import { CONFIGMAP_DATA_LIMIT, configMapBytes, renderServerConfig } from './server-config.ts';

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

export function render(input: Resources): RenderResult {
  const { model, conflicts } = analyse(input);
  if (!model) return { objects: [], conflicts };
  const configs = renderServerConfig(model).filter((cm) => {
    const bytes = configMapBytes(cm);
    if (bytes <= CONFIGMAP_DATA_LIMIT) return true;
    // Never a truncated registry: no ConfigMap (the server then fails closed) and a reported conflict.
    conflicts.push({
      kind: 'RetrievalPlatform',
      name: model.platformRes.metadata.name,
      reason: 'RegistryTooLarge',
      message: `${cm.metadata.name} would hold ${bytes} bytes (limit ${CONFIGMAP_DATA_LIMIT})`,
    });
    return false;
  });
  const objects = [
    ...configs,
    ...renderNetworkPolicies(model),
    ...renderGateway(model),
    ...renderKagent(model),
  ].sort(compareObjects);
  return { objects, conflicts };
}
