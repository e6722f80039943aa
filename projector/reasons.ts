/**
 * Denial reasons of the projector. Contract reasons (carrier and schema failures of the room context
 * or of the projection being emitted) pass through unchanged; the projector adds its own, each stable,
 * content-free and usable as a metrics label.
 */
import type { Reason } from '../contract/index.ts';

export const PROJECTOR_REASONS = [
  'config', // no valid configuration is loaded (deny-all)
  'registry_stale', // the registry is older than the bound: no API contact, or no controller heartbeat
  'timeout_setting', // publicRetrievalTimeoutSeconds missing or outside 1–60
  'route', // x-fgentic-check-route missing, repeated or not local/public
  'path', // request path is not the agent's configured path for this route
  'method', // not POST
  'workload', // authenticated workload is not the configured bridge
  'agent', // route agent headers missing, malformed or not a configured agent for this route
  'count', // a raw-value count header is malformed (not a decimal count)
  'identity_present', // the client sent an X-Fgentic-Identity of its own
  'unexpected_header', // a header that the rendered policy never sends
  'credential_header', // Authorization, Cookie or another credential reached the check request
  'body', // the check request carries (or announces) a body
  'caller_mismatch', // room-context caller differs from X-User-Id
  'caller_kind', // caller kind/network differs from the trusted bridge configuration
  'audience_kind', // an audience entry's kind/network differs from the trusted configuration
  'audience_service', // a bridge service identity appears in the audience
  'room_unregistered', // room ID is not an exact room registry entry
  'classification_widened', // the request asks for classifications beyond the registry's
  'classification_mismatch', // the request asks for fewer classifications than the registry's
  'jwt', // a validated-JWT check header is missing, repeated or malformed
  'partner_unknown', // no registry entry for (issuer, audience, azp)
  'partner_ambiguous', // more than one registry entry for (issuer, audience, azp)
  'partner_agent', // the partner entry does not list this agent
  'token_near_expiry', // remaining token lifetime is not > publicRetrievalTimeoutSeconds + 30
  'homeserver_unavailable', // the live room-state read failed or timed out
  'state_drift', // live room state differs from the room context
  'ledger_unavailable', // ledger mode: the minted value could not be recorded (or no ledger is configured)
  'internal', // an unexpected exception (never an allow)
] as const;

export type ProjectorReason = (typeof PROJECTOR_REASONS)[number];
export type DenyReason = Reason | ProjectorReason;

/** 401 where an authentication input is missing or unusable, 403 for every other denial. */
const UNAUTHENTICATED: ReadonlySet<DenyReason> = new Set<DenyReason>(['missing', 'workload', 'jwt']);

export function statusFor(reason: DenyReason): 401 | 403 {
  return UNAUTHENTICATED.has(reason) ? 401 : 403;
}
