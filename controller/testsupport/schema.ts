/**
 * Test-only: the upstream CRDs (agentgateway, Gateway API, kagent) from the shared upstream folder,
 * loaded into the production validator (crds/validate.ts) so rendered objects are checked the way a
 * kube-apiserver with those CRDs would check them.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { CrdValidator } from '../../crds/validate.ts';
import { sharedSkip } from './shared.ts';

export const UPSTREAM = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/upstream');
export const upstreamAvailable = existsSync(UPSTREAM);
export const SKIP_UPSTREAM = sharedSkip(UPSTREAM, 'shared upstream schemas');

/** agentgateway releases whose CRDs rendered objects must pass. */
export const AGENTGATEWAY_VERSIONS = ['v1.3.1', 'v1.4.1'] as const;

const UPSTREAM_CRDS = [
  'agentgateway-v1.3.1/gateway-api-v1.6.0-rc.1/standard/gateway.networking.k8s.io_httproutes.yaml',
  'agentgateway-v1.3.1/gateway-api-v1.6.0-rc.1/standard/gateway.networking.k8s.io_referencegrants.yaml',
  'agentgateway-v1.3.1/gateway-api-v1.6.0-rc.1/standard/gateway.networking.k8s.io_gateways.yaml',
  'kagent-v0.9.11/kagent.dev_agents.yaml',
  'kagent-v0.9.11/kagent.dev_remotemcpservers.yaml',
  'kagent-v0.9.11/kagent.dev_modelconfigs.yaml',
];

export { type CelReport, toJsonSchema, type ValidationResult } from '../../crds/validate.ts';

/** The upstream CRDs of one agentgateway release plus Gateway API v1.6.0-rc.1 and kagent v0.9.11. */
export function upstreamValidator(
  agentgateway: (typeof AGENTGATEWAY_VERSIONS)[number] = 'v1.3.1',
): CrdValidator {
  const v = new CrdValidator();
  const files = [
    `agentgateway-${agentgateway}/crds/agentgateway.dev_agentgatewaybackends.yaml`,
    `agentgateway-${agentgateway}/crds/agentgateway.dev_agentgatewaypolicies.yaml`,
    ...UPSTREAM_CRDS,
  ];
  for (const f of files)
    for (const d of parseAllDocuments(readFileSync(join(UPSTREAM, f), 'utf8'))) {
      const crd = d.toJS() as Record<string, unknown> | null;
      if (crd?.['kind'] === 'CustomResourceDefinition') v.addCrd(crd);
    }
  return v;
}
