/**
 * The projection is bound to the agent that calls. The gateway's MCP route authenticates the agent's
 * API key, requires its workload to be the route's agent, and then sets `x-fgentic-agent` to that
 * workload, overwriting anything the client sent (controller/render/gateway.ts). A value minted for
 * one agent and replayed by another agent on its own route carries the other agent here, so it is
 * denied, in plain and ledger mode alike. Pure.
 */
import type { AgentRef } from '../../contract/index.ts';

/** Reason codes of the binding (retrieval/README.md lists every reason code of the server). */
export const CALLER_UNBOUND = 'caller_unbound';
export const CALLER_MISMATCH = 'caller_mismatch';

/**
 * Undefined when exactly one `x-fgentic-agent` value names the projection's agent; otherwise the
 * denial: `caller_unbound` when the gateway did not name one caller (absent or repeated), and
 * `caller_mismatch` when it named another agent.
 */
export function callerDenial(
  projectionAgent: AgentRef,
  values: readonly string[],
): typeof CALLER_UNBOUND | typeof CALLER_MISMATCH | undefined {
  if (values.length !== 1) return CALLER_UNBOUND;
  return values[0] === `${projectionAgent.namespace}/${projectionAgent.name}` ? undefined : CALLER_MISMATCH;
}
