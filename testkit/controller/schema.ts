/**
 * Test-only: the upstream CRDs (agentgateway, Gateway API, kagent), loaded into the production
 * validator (crds/validate.ts) so rendered objects are checked the way a kube-apiserver with those
 * CRDs would check them. The schemas live in ./upstream/ (descriptions dropped; see its README and
 * vendor-upstream.ts), so the tests need nothing outside the repository.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CrdValidator } from '../../crds/validate.ts';

export const UPSTREAM_DIR = join(import.meta.dirname, 'upstream');

/** agentgateway releases whose CRDs rendered objects must pass. */
export const AGENTGATEWAY_VERSIONS = ['v1.3.1', 'v1.4.1'] as const;
export type AgentgatewayVersion = (typeof AGENTGATEWAY_VERSIONS)[number];

export interface UpstreamFile {
  /** Name under ./upstream/. */
  readonly file: string;
  /** Path in the release folder it comes from (see ./upstream/README.md for each release's origin). */
  readonly source: string;
  readonly kind: 'crd' | 'objects';
}

const crd = (file: string, source: string): UpstreamFile => ({ file, source, kind: 'crd' });
const GATEWAY_API = 'agentgateway-v1.3.1/gateway-api-v1.6.0-rc.1/standard';

export const UPSTREAM_FILES: readonly UpstreamFile[] = [
  ...AGENTGATEWAY_VERSIONS.flatMap((r) => [
    crd(
      `agentgateway-${r}.agentgatewaybackends.json`,
      `agentgateway-${r}/crds/agentgateway.dev_agentgatewaybackends.yaml`,
    ),
    crd(
      `agentgateway-${r}.agentgatewaypolicies.json`,
      `agentgateway-${r}/crds/agentgateway.dev_agentgatewaypolicies.yaml`,
    ),
  ]),
  crd('gateway-api-v1.6.0-rc.1.httproutes.json', `${GATEWAY_API}/gateway.networking.k8s.io_httproutes.yaml`),
  crd('gateway-api-v1.6.0-rc.1.referencegrants.json', `${GATEWAY_API}/gateway.networking.k8s.io_referencegrants.yaml`),
  crd('gateway-api-v1.6.0-rc.1.gateways.json', `${GATEWAY_API}/gateway.networking.k8s.io_gateways.yaml`),
  crd('kagent-v0.9.11.agents.json', 'kagent-v0.9.11/kagent.dev_agents.yaml'),
  crd('kagent-v0.9.11.remotemcpservers.json', 'kagent-v0.9.11/kagent.dev_remotemcpservers.yaml'),
  crd('kagent-v0.9.11.modelconfigs.json', 'kagent-v0.9.11/kagent.dev_modelconfigs.yaml'),
  ...['policy', 'backend'].flatMap((what) =>
    ['valid', 'invalid'].map(
      (verdict): UpstreamFile => ({
        file: `agentgateway-v1.3.1.api-testdata.${what}-${verdict}.json`,
        source: `agentgateway-v1.3.1/api-testdata/agentgateway_${what}_${verdict}.yaml`,
        kind: 'objects',
      }),
    ),
  ),
];

/** One vendored CRD. */
export function upstreamCrd(file: string): Record<string, any> {
  return JSON.parse(readFileSync(join(UPSTREAM_DIR, file), 'utf8'));
}

/** The custom resources of one vendored agentgateway API test data file. */
export function upstreamObjects(file: string): Record<string, unknown>[] {
  return JSON.parse(readFileSync(join(UPSTREAM_DIR, file), 'utf8'));
}

export { type CelReport, toJsonSchema, type ValidationResult } from '../../crds/validate.ts';

/** The upstream CRDs of one agentgateway release plus Gateway API v1.6.0-rc.1 and kagent v0.9.11. */
export function upstreamValidator(agentgateway: AgentgatewayVersion = 'v1.3.1'): CrdValidator {
  const v = new CrdValidator();
  for (const f of UPSTREAM_FILES) {
    if (f.kind !== 'crd') continue;
    if (f.file.startsWith('agentgateway-') && !f.file.startsWith(`agentgateway-${agentgateway}.`)) continue;
    v.addCrd(upstreamCrd(f.file));
  }
  return v;
}
