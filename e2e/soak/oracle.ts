/**
 * What the stack may answer at a given moment, from the demo corpus's ACLs and the registry state
 * the soak has written. Pure: no I/O, the soak feeds it times and observations.
 *
 * A change of registry (the revocation) takes effect in the projector after at most
 * `REVOCATION_BOUND_MS`: the projector re-reads its file on change events and every 1 s
 * (projector/config.ts), so 1 s plus scheduling slack on a loaded machine. A request that started
 * before the change plus the bound may be judged by either state; one that started later only by
 * the new state. The same holds for room membership on the homeserver, whose changes the live check
 * sees at once (no bound beyond the request's own duration).
 */
import type { MatrixPrincipal } from '../../contract/index.ts';
import { DEMO_CHUNKS } from '../../local/demo-corpus.ts';

export const REVOCATION_BOUND_MS = 2_000;

export type Classification = 'public' | 'approved_non_public';

export interface Registry {
  readonly rooms: ReadonlyMap<string, readonly Classification[]>;
  /** azp → partner policy. */
  readonly partners: ReadonlyMap<string, { groups: readonly string[]; classes: readonly Classification[] }>;
}

interface Version {
  readonly at: number;
  readonly registry: Registry;
}

const samePrincipal = (a: MatrixPrincipal, b: { kind: string; principal: string; network?: string }) =>
  a.kind === b.kind &&
  a.principal === b.principal &&
  (a.kind === 'bridged_matrix' ? a.network === b.network : b.network === undefined);

const CHUNKS = new Map(DEMO_CHUNKS.map((c) => [`demo/${c.id}`, c]));

/** Whether a chunk (by source id) is readable by every audience member under the classes. */
export function matrixMayRead(
  sourceId: string,
  audience: readonly MatrixPrincipal[],
  classes: readonly string[],
): boolean {
  const c = CHUNKS.get(sourceId);
  if (!c || !classes.includes(c.classification)) return false;
  return audience.every((m) => c.principals.some((p) => samePrincipal(m, p as never)));
}

export function partnerMayRead(sourceId: string, groups: readonly string[], classes: readonly string[]): boolean {
  const c = CHUNKS.get(sourceId);
  if (!c || !classes.includes(c.classification)) return false;
  return c.groups.some((g) => groups.includes(g));
}

export class RegistryHistory {
  private readonly versions: Version[] = [];

  constructor(initial: Registry, at: number) {
    this.versions.push({ at, registry: initial });
  }

  change(registry: Registry, at: number): void {
    this.versions.push({ at, registry });
  }

  get current(): Registry {
    return this.versions.at(-1)!.registry;
  }

  /**
   * Every registry state a decision for a request in [start, end] may legitimately reflect: the one
   * in force at `start - bound` and every later one that took effect before `end`.
   */
  admissible(start: number, end: number): Registry[] {
    const out: Registry[] = [];
    for (let i = 0; i < this.versions.length; i++) {
      const v = this.versions[i]!;
      const next = this.versions[i + 1];
      // Still admissible if it was replaced less than the bound before the request started.
      const expired = next !== undefined && next.at + REVOCATION_BOUND_MS < start;
      if (!expired && v.at <= end) out.push(v.registry);
    }
    return out;
  }
}

/** Membership of a room on the homeserver over time (member lists as the live check reads them). */
export class MembershipHistory {
  private readonly changes = new Map<string, number[]>();

  record(roomId: string, at: number): void {
    const list = this.changes.get(roomId) ?? [];
    list.push(at);
    this.changes.set(roomId, list);
  }

  /** Whether the room's membership changed while the request was in flight (plus slack). */
  changedDuring(roomId: string, start: number, end: number, slackMs = 50): boolean {
    return (this.changes.get(roomId) ?? []).some((t) => t >= start - slackMs && t <= end + slackMs);
  }
}
