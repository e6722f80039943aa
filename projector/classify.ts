/**
 * Identity kinds from the trusted bridge configuration only (ADR 0017 Matrix rule 1, docs/decisions.md#adr-matrix-rules): a request, a
 * prompt, room state or a localpart never chooses the kind or network. Pure.
 */
import type { ProjectorConfig } from './config.ts';

export type Classified =
  | { readonly kind: 'bridge_service' }
  | { readonly kind: 'bridged_matrix'; readonly network: string }
  | { readonly kind: 'matrix' }
  | { readonly kind: 'ambiguous' };

/** Bridge service identities first; then bridged origins (more than one match is ambiguous). */
export function classifyMxid(config: ProjectorConfig, mxid: string): Classified {
  if (config.bridge.serviceUserRegex.test(mxid)) return { kind: 'bridge_service' };
  let network: string | undefined;
  for (const o of config.bridge.bridgedOrigins) {
    if (!o.userIdRegex.test(mxid)) continue;
    if (network !== undefined) return { kind: 'ambiguous' };
    network = o.network;
  }
  return network === undefined ? { kind: 'matrix' } : { kind: 'bridged_matrix', network };
}

/** Whether a typed principal carries exactly the kind/network the configuration assigns. */
export function matchesClassification(
  p: { readonly kind: string; readonly network?: string; readonly principal: string },
  c: Classified,
): boolean {
  if (c.kind === 'matrix') return p.kind === 'matrix' && p.network === undefined;
  if (c.kind === 'bridged_matrix') return p.kind === 'bridged_matrix' && p.network === c.network;
  return false;
}
