/** Test-only builders: the examples/ resources, cloned, with one field changed where a test needs it. */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadResources } from '../../controller/render-command.ts';
import type { PartnerClient, Resources, RetrievalAgent, RetrievalRoom } from '../../controller/types.ts';

export const REPO = join(fileURLToPath(import.meta.url), '../../..');
export const EXAMPLES = join(REPO, 'examples');

export function examples(): Resources {
  return structuredClone(loadResources([EXAMPLES]));
}

export function agent(namespace: string, name: string, patch: Partial<RetrievalAgent['spec']> = {}): RetrievalAgent {
  const base = examples().agents[0] as RetrievalAgent;
  return { ...base, metadata: { name, namespace }, spec: { ...base.spec, ...patch } };
}

export function room(name: string, roomId: string, patch: Partial<RetrievalRoom['spec']> = {}): RetrievalRoom {
  return {
    apiVersion: 'retrieval.fgentic.dev/v1alpha1',
    kind: 'RetrievalRoom',
    metadata: { name },
    spec: { roomId, allowedClassifications: ['public'], ...patch },
  };
}

export function partner(name: string, patch: Partial<PartnerClient['spec']> = {}): PartnerClient {
  return {
    apiVersion: 'retrieval.fgentic.dev/v1alpha1',
    kind: 'PartnerClient',
    metadata: { name },
    spec: {
      issuer: 'https://issuer.example',
      audience: 'fgentic-a2a',
      azp: `${name}-azp`,
      policyId: 'org-x',
      groups: ['partner/org-x/docs'],
      allowedClassifications: ['public'],
      agents: [{ namespace: 'kagent', name: 'knowledge-agent' }],
      ...patch,
    },
  };
}
