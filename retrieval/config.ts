/**
 * Strict read of retrieval.json (docs/interfaces.md "Retrieval configuration file"), in the one
 * config-reader style (rules/reader.ts): every problem is reported, each with its path and reason
 * code, and each field is checked with the rule the CRD and the render use (rules/embeddings.ts,
 * rules/urls.ts, rules/kube.ts), so a file rendered from admitted resources always loads. Unknown
 * keys, wrong types or an empty agent list are errors: the server refuses to start rather than
 * guess. At most `MAX_AGENTS` agents, the most a 1 MiB ConfigMap always holds
 * (rules/agent-bound.ts). The primary's URL never comes from this file (DATABASE_URL only); the
 * read replicas may (`database`, rules/database.ts), without credentials.
 */
import { type AgentRef, parseStrictJson } from '../contract/index.ts';
import { MAX_AGENTS } from '../rules/agent-bound.ts';
import { agentLimit, claimedByOthers } from '../rules/cross-object.ts';
import {
  checkReplicaSettings,
  DEFAULT_REPLICA_SETTINGS,
  REPLICA_FIELDS,
  type ReplicaSettings,
  replicaSettings,
} from '../rules/database.ts';
import { checkModel, checkProfile, LOCAL_PROFILE } from '../rules/embeddings.ts';
import { checkLabel } from '../rules/kube.ts';
import {
  CAPABILITY_MODES,
  type CapabilityMode,
  checkLedgerTiming,
  DEFAULT_LEDGER_TIMING,
  isCapabilityMode,
  type LedgerTiming,
  ledgerTiming,
} from '../rules/ledger.ts';
import { ConfigReader, isObject as isObj, type ReadResult } from '../rules/reader.ts';
import { formatProblems, type Problems, problem } from '../rules/result.ts';
import { checkHttpUrl } from '../rules/urls.ts';

export interface EmbeddingsConfig {
  readonly profile: string;
  readonly url?: string;
  readonly model?: string;
  readonly tokenFile?: string;
}

export interface RetrievalConfig {
  readonly version: 1;
  readonly agents: readonly AgentRef[];
  readonly embeddings: EmbeddingsConfig;
  readonly allowedOrigins: readonly string[];
  /** Absent means `plain` (the reconciler renders the field only for `ledger`). */
  readonly capability: CapabilityMode;
  /** Ledger timing, defaults filled in (rules/ledger.ts); the server uses the mint window. */
  readonly ledger: LedgerTiming;
  /** Read replicas and pooler mode, defaults filled in (rules/database.ts); absent: none. */
  readonly database: ReplicaSettings;
}

const STRING_MAX = 2048;

export interface ParseOptions {
  /**
   * Accept an empty agent list (every call denied). A running server's reload does: the controller
   * renders `[]` once the last RetrievalAgent is gone, and refusing that would keep serving it.
   * Starting from a file still refuses it.
   */
  readonly allowNoAgents?: boolean;
}

function readAgents(r: ConfigReader, v: unknown, options: ParseOptions): AgentRef[] {
  const list = r.array(v, 'agents', MAX_AGENTS + 1) ?? [];
  if (Array.isArray(v) && v.length === 0 && options.allowNoAgents !== true)
    r.report(problem('required', 'agents', 'must list at least one agent'));
  r.add(agentLimit(list.length, 'agents'));
  const seen = new Map<string, number>();
  const agents: AgentRef[] = [];
  list.forEach((a, i) => {
    const path = `agents[${i}]`;
    const o = r.object(a, path, ['namespace', 'name']);
    const namespace = o && r.checked<string>(o['namespace'], checkLabel, `${path}.namespace`);
    const name = o && r.checked<string>(o['name'], checkLabel, `${path}.name`);
    if (namespace === undefined || name === undefined) return;
    const key = `${namespace}/${name}`;
    r.add(claimedByOthers('agent-duplicate', path, seen.has(key) ? [`agents[${seen.get(key)}]`] : []));
    seen.set(key, i);
    agents.push({ namespace, name });
  });
  return agents;
}

function readEmbeddings(r: ConfigReader, v: unknown): EmbeddingsConfig | undefined {
  const profile = (v as { profile?: unknown } | undefined)?.profile;
  const profileOk = r.add(checkProfile(profile, 'embeddings.profile'));
  // The embedded stack's deterministic embedder needs no endpoint.
  const local = profile === LOCAL_PROFILE;
  const e = local
    ? r.object(v, 'embeddings', ['profile'])
    : r.object(v, 'embeddings', ['profile', 'url', 'model'], ['tokenFile']);
  if (!e || !profileOk) return undefined;
  if (local) return { profile: LOCAL_PROFILE };
  // A missing url or model is reported by `object`; a present one is checked by its rule.
  const urlOk = e['url'] !== undefined && r.add(checkHttpUrl(e['url'], 'embeddings.url'));
  const modelOk = e['model'] !== undefined && r.add(checkModel(e['model'], 'embeddings.model'));
  const tokenFile =
    e['tokenFile'] === undefined ? undefined : r.string(e['tokenFile'], 'embeddings.tokenFile', STRING_MAX);
  if (!urlOk || !modelOk) return undefined;
  return {
    profile: profile as string,
    url: e['url'] as string,
    model: e['model'] as string,
    ...(tokenFile !== undefined ? { tokenFile } : {}),
  };
}

function readOrigins(r: ConfigReader, v: unknown): string[] {
  const out: string[] = [];
  (r.array(v ?? [], 'allowedOrigins', 64) ?? []).forEach((o, i) => {
    const path = `allowedOrigins[${i}]`;
    const s = r.string(o, path, 512);
    if (s === undefined) return;
    let origin: string | undefined;
    try {
      origin = new URL(s).origin;
    } catch {
      origin = undefined;
    }
    // An origin is scheme://host[:port] exactly, as browsers send it.
    if (origin !== s) r.report(problem('http-url', path, 'must be an origin, scheme://host[:port]'));
    else out.push(s);
  });
  return out;
}

/** A parsed retrieval.json value → configuration, or every problem. Never throws. */
export function readConfig(value: unknown, options: ParseOptions = {}): ReadResult<RetrievalConfig> {
  const r = new ConfigReader();
  const root = r.object(
    value,
    '',
    ['version', 'agents', 'embeddings'],
    ['allowedOrigins', 'capability', 'ledger', 'database'],
  );
  if (!root) return r.result(() => undefined as never);
  if (root['version'] !== 1) r.report(problem('config-version', 'version', 'must be 1'));
  const agents = readAgents(r, root['agents'], options);
  const embeddings = readEmbeddings(r, root['embeddings']);
  const allowedOrigins = readOrigins(r, root['allowedOrigins']);
  const capability = root['capability'] ?? 'plain';
  if (!isCapabilityMode(capability))
    r.report(problem('capability', 'capability', `must be ${CAPABILITY_MODES.join(' or ')}`));
  // The pair is checked together: the projector's deadline must lie inside this server's window.
  r.add(checkLedgerTiming(root['ledger'], 'ledger'));
  const database = root['database'] === undefined ? {} : r.object(root['database'], 'database', [], REPLICA_FIELDS);
  if (database) r.add(checkReplicaSettings(database, 'database'));
  return r.result(() => ({
    version: 1 as const,
    agents,
    embeddings: embeddings as EmbeddingsConfig,
    allowedOrigins,
    capability: capability as CapabilityMode,
    ledger: ledgerTiming(root['ledger']) ?? DEFAULT_LEDGER_TIMING,
    database: replicaSettings(database) ?? DEFAULT_REPLICA_SETTINGS,
  }));
}

/** The problems of a refused file on one line, content-free. */
export function describeProblems(problems: Problems): string {
  return formatProblems(problems);
}

export type ConfigTextResult =
  | { readonly ok: true; readonly config: RetrievalConfig }
  | {
      readonly ok: false;
      /** What is wrong, content-free: a JSON offset, or each problem's field path, message and reason. */
      readonly problem: string;
      /**
       * The agents the text lists, when it has a readable `agents` array even though the whole is
       * invalid: a server keeping its last good configuration still drops the agents missing here.
       */
      readonly listed?: ReadonlySet<string>;
    };

/** `namespace/name`, the key of an agent in sets. */
export const agentKey = (a: AgentRef): string => `${a.namespace}/${a.name}`;

/** retrieval.json text → configuration, or a content-free problem. No I/O. */
export function parseConfigText(text: string, options: ParseOptions = {}): ConfigTextResult {
  const parsed = parseStrictJson(text, { maxDepth: 8, maxLength: 1 << 20 });
  if (!parsed.ok)
    return {
      ok: false,
      problem:
        parsed.error === 'duplicate_name' ? 'a member name appears twice' : `not valid JSON at offset ${parsed.offset}`,
    };
  const read = readConfig(parsed.value, options);
  if (read.ok) return { ok: true, config: read.value };
  const problem = describeProblems(read.problems);
  const v = parsed.value;
  const agents = isObj(v) ? v['agents'] : undefined;
  if (!Array.isArray(agents)) return { ok: false, problem };
  const listed = new Set<string>();
  for (const a of agents)
    if (isObj(a) && typeof a['namespace'] === 'string' && typeof a['name'] === 'string')
      listed.add(agentKey({ namespace: a['namespace'], name: a['name'] }));
  return { ok: false, problem, listed };
}
