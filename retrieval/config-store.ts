/**
 * The retrieval server's live configuration (I/O): which agents it serves and which browser origins
 * it allows, reloaded while it runs, from retrieval.json on disk (file source) or from the ConfigMap
 * through the Kubernetes API (config-kube.ts).
 *
 * Rules, the same for both sources:
 * - A valid new configuration replaces the old one in one assignment: an added agent is served from
 *   the next request on, a removed one is denied from the next request on.
 * - An invalid new configuration is rejected: its problem (a JSON offset or a field path, never a
 *   value) is logged and counted, and the configuration serving so far keeps serving, narrowed to
 *   the agents the rejected text still lists when its agent list is readable. A rejected text never
 *   adds an agent, and a removal never waits for a valid file.
 * - A missing configuration (file gone, ConfigMap deleted) serves no agent: every call is refused
 *   and readiness is false until a valid one appears.
 * - The embeddings section is read once, at start (the embedder and the database's profile check
 *   depend on it); a changed one is logged and applies at the next start.
 */
import { readFileSync } from 'node:fs';
import { Counter, Gauge, type Registry } from 'prom-client';
import { watchConfigFile } from '../common/file-watch.ts';
import type { AgentRef } from '../contract/index.ts';
import { agentKey, parseConfigText, type RetrievalConfig } from './config.ts';

/** What the server serves right now, or why it serves nothing. */
export type RetrievalConfigState =
  | {
      readonly ready: true;
      readonly config: RetrievalConfig;
      readonly generation: number;
      /** Set while the newest configuration seen was rejected: its content-free problem. */
      readonly rejected?: string;
    }
  | { readonly ready: false; readonly error: string; readonly generation: number };

export interface RetrievalConfigStore {
  current(): RetrievalConfigState;
  /** Configuration texts seen while running, by result (for the reloads counter). */
  reloads?(): Readonly<Record<ReloadResult, number>>;
  /** Seconds since the last contact with the API server (Kubernetes source only). */
  stalenessSeconds?(): number;
  close(): void;
}

export type ReloadResult = 'applied' | 'rejected' | 'missing';

export interface ReloadEvents {
  /** Every new state (a reload, and for the Kubernetes source a staleness transition). */
  readonly onChange?: (state: RetrievalConfigState) => void;
  /** Every configuration text seen (unchanged texts are not seen twice); `problem` when rejected. */
  readonly onReload?: (result: ReloadResult, problem?: string) => void;
}

/** A store over a fixed configuration: tests, embedded stacks, and servers started with an agent list. */
export function staticRetrievalConfig(config: RetrievalConfig): RetrievalConfigStore {
  const state: RetrievalConfigState = { ready: true, config, generation: 1 };
  return { current: () => state, close: () => {} };
}

/**
 * The reload rules above over a sequence of texts (`undefined`: the configuration is missing).
 * No I/O; both sources feed it.
 */
export function configTracker(events: ReloadEvents = {}) {
  const counts: Record<ReloadResult, number> = { applied: 0, rejected: 0, missing: 0 };
  const reloaded = (result: ReloadResult, problem?: string) => {
    counts[result] += 1;
    events.onReload?.(result, problem);
  };
  let generation = 0;
  let state: RetrievalConfigState = { ready: false, error: 'configuration not loaded', generation };
  let lastText: string | undefined | null = null; // null: nothing seen yet
  const publish = (next: RetrievalConfigState) => {
    state = next;
    events.onChange?.(state);
  };
  return {
    state: () => state,
    counts: (): Readonly<Record<ReloadResult, number>> => counts,
    /** A failure to read the text at all: counted as rejected; what serves is unchanged. */
    unreadable: (problem: string) => reloaded('rejected', problem),
    apply(text: string | undefined): void {
      if (text === lastText) return;
      lastText = text;
      generation += 1;
      if (text === undefined) {
        publish({ ready: false, error: 'configuration missing', generation });
        reloaded('missing');
        return;
      }
      const r = parseConfigText(text, { allowNoAgents: true });
      if (r.ok) {
        publish({ ready: true, config: r.config, generation });
        reloaded('applied');
        return;
      }
      if (!state.ready) {
        publish({ ready: false, error: `configuration invalid (${r.problem})`, generation });
      } else {
        const listed = r.listed;
        const agents: readonly AgentRef[] =
          listed === undefined ? state.config.agents : state.config.agents.filter((a) => listed.has(agentKey(a)));
        publish({
          ready: true,
          config: agents.length === state.config.agents.length ? state.config : { ...state.config, agents },
          generation,
          rejected: r.problem,
        });
      }
      reloaded('rejected', r.problem);
    },
  };
}

export interface FileConfigOptions extends ReloadEvents {
  /** Re-read interval in ms, besides the directory watch (default 1000). */
  readonly pollMs?: number;
}

/**
 * retrieval.json on disk, read now and again whenever the directory reports a change (a mounted
 * ConfigMap is swapped through a `..data` symlink rename, hence the directory) and at every poll (a
 * file system whose watch misses changes). A read that fails with ENOENT is a missing file; any other
 * read failure is a rejected configuration.
 */
export function fileRetrievalConfigStore(path: string, options: FileConfigOptions = {}): RetrievalConfigStore {
  const tracker = configTracker(options);
  let unreadable: string | undefined;
  const reload = () => {
    let text: string | undefined;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'unknown';
      if (code !== 'ENOENT') {
        // Counted once per failure streak, not once per poll.
        if (unreadable !== code) tracker.unreadable(`cannot be read (${code})`);
        unreadable = code;
        return;
      }
      text = undefined;
    }
    unreadable = undefined;
    tracker.apply(text);
  };
  reload();
  const stop = watchConfigFile(path, reload, options.pollMs !== undefined ? { pollMs: options.pollMs } : {});
  return {
    current: () => tracker.state(),
    reloads: tracker.counts,
    close: stop,
  };
}

/** The configuration's metrics on the server's registry, read from the store on each scrape. */
export function configMetrics(registry: Registry, store: RetrievalConfigStore): void {
  new Counter({
    name: 'fgentic_retrieval_config_reloads_total',
    help: 'Configuration texts seen while running, by result (applied, rejected, missing).',
    labelNames: ['result'] as const,
    registers: [registry],
    collect() {
      const counts = store.reloads?.();
      if (counts === undefined) return;
      // The store's counts only grow: resetting and setting them keeps the counter monotonic.
      this.reset();
      for (const [result, n] of Object.entries(counts)) if (n > 0) this.inc({ result }, n);
    },
  });
  new Gauge({
    name: 'fgentic_retrieval_config_rejected',
    help: '1 while the newest configuration seen was rejected and the previous one serves (narrowed to the agents the rejected one lists), else 0.',
    registers: [registry],
    collect() {
      const s = store.current();
      this.set(s.ready && s.rejected !== undefined ? 1 : 0);
    },
  });
  new Gauge({
    name: 'fgentic_retrieval_config_agents',
    help: 'Agents whose calls are served now (0 while the configuration is missing or stale).',
    registers: [registry],
    collect() {
      const s = store.current();
      this.set(s.ready ? s.config.agents.length : 0);
    },
  });
  new Gauge({
    name: 'fgentic_retrieval_config_staleness_seconds',
    help: 'Seconds since the last contact with the API server for the configuration (0 while its watch is open, -1 before any contact, always 0 with the file source).',
    registers: [registry],
    collect() {
      const v = store.stalenessSeconds?.() ?? 0;
      this.set(Number.isFinite(v) ? v : -1);
    },
  });
}
