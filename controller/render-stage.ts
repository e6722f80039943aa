/**
 * The pass's render stage: the incremental render (render/incremental.ts) with its memo, the hashed
 * copy of each object remembered by identity, and which RetrievalAgent owns which object. A resync
 * (`reset`) drops the memos, so everything is rendered, hashed and compared afresh; that long walk
 * yields to the event loop every `YIELD_EVERY` objects, so the registry's urgent per-key work
 * (revocations, registry-sync.ts) is never held behind it.
 */
import { PASS_STAGES, type PassStage, type RegistryHooks } from './cluster.ts';
import { withHash } from './desired.ts';
import { type RenderMemo, renderIncremental } from './render/incremental.ts';
import type { Conflict, K8sObject, Resources } from './types.ts';

/** Measures the stages of one pass. */
export function stageClock() {
  const stages = Object.fromEntries(PASS_STAGES.map((s) => [s, 0])) as Record<PassStage, number>;
  let mark = performance.now();
  return {
    stages,
    lap(stage: PassStage) {
      const t = performance.now();
      stages[stage] += t - mark;
      mark = t;
    },
  };
}

export const YIELD_EVERY = 256;
export const yieldToEvents = (): Promise<void> => new Promise((r) => setImmediate(r));

export class RenderStage {
  /** The previous render's inputs and outputs (incremental mode). */
  private memo: RenderMemo | undefined;
  /**
   * Rendered object → the same with its hash annotation. The incremental render hands back the very
   * object of the previous pass when its content is unchanged, so identity is enough.
   */
  private hashed = new WeakMap<K8sObject, K8sObject>();
  /** Object key → the RetrievalAgent (`namespace/name`) whose objects it is one of (last render). */
  owners = new Map<string, string>();

  constructor(
    private readonly incremental: boolean,
    private readonly registry: RegistryHooks | undefined,
  ) {}

  reset(): void {
    this.memo = undefined;
    this.hashed = new WeakMap();
  }

  async run(input: Resources): Promise<{
    conflicts: Conflict[];
    objects: K8sObject[];
    agentsRendered: number;
  }> {
    const registry = this.registry === undefined;
    // Without `incremental`, every pass renders from scratch (the same result as `render`).
    const r = renderIncremental(input, this.incremental ? this.memo : undefined, { registry });
    if (this.incremental) this.memo = r.memo;
    this.owners = r.owners;
    if (this.registry) {
      this.registry.onModel(r.model);
      const tooLarge = this.registry.tooLarge();
      if (tooLarge && r.model)
        r.conflicts.push({
          kind: 'RetrievalPlatform',
          name: r.model.platformRes.metadata.name,
          reason: 'RegistryTooLarge',
          message: tooLarge,
        });
    }
    const hashed = new WeakMap<K8sObject, K8sObject>();
    const objects: K8sObject[] = [];
    for (const o of r.objects) {
      const memo = this.incremental ? this.hashed.get(o) : undefined;
      // A resync hashes every object: let the registry's urgent work in between.
      if (!memo && objects.length % YIELD_EVERY === 0) await yieldToEvents();
      const h = memo ?? withHash(o);
      hashed.set(o, h);
      objects.push(h);
    }
    this.hashed = hashed; // only this pass's objects: the previous ones may be collected
    return { conflicts: r.conflicts, objects, agentsRendered: r.agentsRendered };
  }
}
