/**
 * Offline admission: the same AdmissionReview path as the server, applied to a set of manifests treated
 * as CREATE requests by one user, with the whole set as the ClusterView. Our own kinds are first checked
 * against our CRDs' structural schema and CEL rules (crds/validate.ts), as the API server does before
 * any webhook sees them, so offline denials equal the cluster's.
 */
import { allCrds } from '../crds/schema.ts';
import { crValidator } from '../crds/validate.ts';
import type { Manifest } from './manifests.ts';
import { makeAdmissionReview, review } from './review.ts';
import {
  DEFAULT_RULES_CONFIG,
  KAGENT_GROUP,
  nameOf,
  namespaceOf,
  RETRIEVAL_GROUP,
  type RulesConfig,
  str,
} from './rules/types.ts';
import { groupOf, StaticClusterView } from './view.ts';

export type OfflineVerdict = 'allowed' | 'denied' | 'skipped' | 'error';

export interface OfflineResult {
  source: string;
  index: number;
  kind: string;
  namespace: string;
  name: string;
  verdict: OfflineVerdict;
  message: string;
  warnings: string[];
}

export function inScope(group: string, kind: string): boolean {
  return group === RETRIEVAL_GROUP || (group === KAGENT_GROUP && (kind === 'Agent' || kind === 'RemoteMCPServer'));
}

let crds: ReturnType<typeof crValidator> | undefined;

export function checkManifests(
  manifests: readonly Manifest[],
  username: string,
  cfg: RulesConfig = DEFAULT_RULES_CONFIG,
): OfflineResult[] {
  const objects = manifests.flatMap((m) => (m.object ? [m.object] : []));
  const view = new StaticClusterView(objects);
  const seen = new Map<string, string>();
  const results: OfflineResult[] = [];
  let uid = 0;
  for (const m of manifests) {
    if (!m.object) {
      results.push({
        source: m.source,
        index: m.index,
        kind: '',
        namespace: '',
        name: '',
        verdict: 'error',
        message: m.error ?? 'unreadable',
        warnings: [],
      });
      continue;
    }
    const o = m.object;
    const kind = str(o, 'kind') ?? '';
    const group = groupOf(o);
    const base = { source: m.source, index: m.index, kind, namespace: namespaceOf(o), name: nameOf(o) };
    if (!inScope(group, kind)) {
      results.push({ ...base, verdict: 'skipped', message: 'not reviewed by this webhook', warnings: [] });
      continue;
    }
    const identity = `${group}/${kind}/${base.namespace}/${base.name}`;
    const first = seen.get(identity);
    if (first !== undefined) {
      results.push({
        ...base,
        verdict: 'denied',
        message: `duplicate object: already defined in ${first} [duplicate-object]`,
        warnings: [],
      });
      continue;
    }
    seen.set(identity, `${m.source}#${m.index}`);
    if (group === RETRIEVAL_GROUP) {
      crds ??= crValidator(allCrds());
      const problems = crds.validate(o);
      if (problems.length > 0) {
        results.push({
          ...base,
          verdict: 'denied',
          message: `${problems.slice(0, 5).join('; ')} [crd-schema]`,
          warnings: [],
        });
        continue;
      }
    }
    const body = makeAdmissionReview(o, { operation: 'CREATE', username, uid: `offline-${++uid}` });
    const out = review(body, view, cfg);
    const r = out.review.response;
    results.push({
      ...base,
      verdict: r.allowed ? 'allowed' : out.verdict === 'error' ? 'error' : 'denied',
      message: r.status?.message ?? 'allowed',
      warnings: r.warnings ?? [],
    });
  }
  return results;
}
