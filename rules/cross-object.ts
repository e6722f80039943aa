/**
 * The rules across resources: a room ID or a partner mapping key claimed once, no partner group that
 * is also a local group, and no more RetrievalAgents than both servers' files hold. The webhook
 * (against its view of the cluster), the reconciler's analysis (over every resource) and the
 * projector's loader (over its file) all call these, so each reports the same reason code
 * (rules/reasons.ts, `CROSS_OBJECT_REASONS` also gives the reconciler's condition reason) and the
 * same message. Messages name the other resources, never the contested value. Pure.
 */
import { MAX_AGENTS } from './agent-bound.ts';
import { CROSS_OBJECT_REASONS, type CrossObjectReason, isCrossObjectReason } from './reasons.ts';
import { type Problem, problem } from './result.ts';

const CLAIMED: Record<'room-duplicate' | 'partner-duplicate' | 'agent-duplicate', string> = {
  'room-duplicate': 'room ID also declared by',
  'partner-duplicate': '(issuer, audience, azp) also mapped by',
  'agent-duplicate': 'kagent Agent also claimed by',
};

/**
 * A key (room ID, partner mapping key, kagent Agent) that `others` claim too: one problem naming
 * them; none when no other claims it.
 */
export function claimedByOthers(reason: keyof typeof CLAIMED, path: string, others: readonly string[]): Problem[] {
  if (others.length === 0) return [];
  const names = [...others].sort();
  const shown = names.length > 3 ? `${names.slice(0, 3).join(', ')} and ${names.length - 3} more` : names.join(', ');
  return [problem(reason, path, `${CLAIMED[reason]} ${shown}; the key must be unique`)];
}

/** Every key claimed more than once, with the indices of its claimants. */
export function duplicateKeys<T>(items: readonly T[], keyOf: (t: T) => string): Map<string, number[]> {
  const byKey = new Map<string, number[]>();
  items.forEach((t, i) => {
    const k = keyOf(t);
    const list = byKey.get(k);
    if (list) list.push(i);
    else byKey.set(k, [i]);
  });
  for (const [k, list] of byKey) if (list.length < 2) byKey.delete(k);
  return byKey;
}

/** Each of `groups` that is also one of `otherGroups` (partner groups against local groups, or back). */
export function groupCollisions(
  groups: readonly unknown[],
  otherGroups: ReadonlySet<string>,
  path: string,
  owner: string,
): Problem[] {
  const out: Problem[] = [];
  groups.forEach((g, i) => {
    if (typeof g === 'string' && otherGroups.has(g))
      out.push(problem('group-collision', `${path}[${i}]`, `also a group of ${owner}`));
  });
  return out;
}

/** `count` RetrievalAgents (this one included): within the bound both servers' files hold. */
export function agentLimit(count: number, path: string, max = MAX_AGENTS): Problem[] {
  return count <= max
    ? []
    : [problem('agent-limit', path, `more than ${max} RetrievalAgents; the servers' configuration holds ${max}`)];
}

/**
 * Which RetrievalAgents the servers serve when there are more than the bound: the first `max` in
 * `order` (the reconciler orders by creation, then namespace/name, so the newest are the ones
 * refused, as the webhook refuses the one created past the bound). The rest are refused, each with
 * its own `agent-limit` conflict; the files never list more than the bound, nor drop an agent they
 * listed before because a newer one arrived.
 */
export function withinAgentLimit<T>(
  agents: readonly T[],
  order: (a: T, b: T) => number,
  max = MAX_AGENTS,
): { kept: T[]; refused: T[] } {
  if (agents.length <= max) return { kept: [...agents], refused: [] };
  const sorted = [...agents].sort(order);
  return { kept: sorted.slice(0, max), refused: sorted.slice(max) };
}

/** The reconciler's `Conflict` condition reason for a problem: the cross-object one, else `Invalid`. */
export function conflictReason(p: Problem): (typeof CROSS_OBJECT_REASONS)[CrossObjectReason] | 'Invalid' {
  return isCrossObjectReason(p.reason) ? CROSS_OBJECT_REASONS[p.reason] : 'Invalid';
}
