/**
 * Strict parse of retrieval.json (docs/interfaces.md "Retrieval configuration file"). Unknown keys,
 * wrong types or an empty agent list are errors: the server refuses to start rather than guess. At
 * most `MAX_AGENTS` agents, the most a 1 MiB ConfigMap always holds (rules/agent-bound.ts).
 * The database URL never comes from this file (DATABASE_URL only).
 */
import { type AgentRef, isDns1123Label, parseStrictJson } from '../contract/index.ts';
import { MAX_AGENTS } from '../rules/agent-bound.ts';
import {
  CAPABILITY_MODES,
  type CapabilityMode,
  checkLedgerTiming,
  DEFAULT_LEDGER_TIMING,
  type LedgerTiming,
  ledgerTiming,
} from '../rules/ledger.ts';
import { LOCAL_PROFILE } from './embeddings/local.ts';

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
}

export class ConfigError extends Error {
  constructor(readonly path: string) {
    super(`invalid retrieval config at ${path}`);
    this.name = 'ConfigError';
  }
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function only(o: Obj, required: string[], optional: string[], path: string): void {
  // An unknown member is named by where it is, not by its name: the name is the file's content.
  for (const k of Object.keys(o))
    if (!required.includes(k) && !optional.includes(k)) throw new ConfigError(`${path} (unknown member)`);
  for (const k of required) if (!Object.hasOwn(o, k)) throw new ConfigError(`${path}.${k}`);
}

function str(v: unknown, path: string, max = 2048): string {
  if (typeof v !== 'string' || v.length === 0 || v.length > max || v.trim() !== v)
    throw new ConfigError(path);
  return v;
}

const PROFILE = /^[a-z0-9][a-z0-9.-]{0,62}[a-z0-9]$/;

export interface ParseOptions {
  /**
   * Accept an empty agent list (every call denied). A running server's reload does: the controller
   * renders `[]` once the last RetrievalAgent is gone, and refusing that would keep serving it.
   * Starting from a file still refuses it.
   */
  readonly allowNoAgents?: boolean;
}

export function parseConfig(value: unknown, options: ParseOptions = {}): RetrievalConfig {
  if (!isObj(value)) throw new ConfigError('$');
  only(value, ['version', 'agents', 'embeddings'], ['allowedOrigins', 'capability', 'ledger'], '$');
  if (value['version'] !== 1) throw new ConfigError('$.version');
  const agentsIn = value['agents'];
  if (
    !Array.isArray(agentsIn) ||
    (agentsIn.length === 0 && options.allowNoAgents !== true) ||
    agentsIn.length > MAX_AGENTS
  )
    throw new ConfigError('$.agents');
  const agents = agentsIn.map((a, i) => {
    const path = `$.agents[${i}]`;
    if (!isObj(a)) throw new ConfigError(path);
    only(a, ['namespace', 'name'], [], path);
    if (!isDns1123Label(a['namespace'])) throw new ConfigError(`${path}.namespace`);
    if (!isDns1123Label(a['name'])) throw new ConfigError(`${path}.name`);
    return { namespace: a['namespace'], name: a['name'] };
  });
  const e = value['embeddings'];
  if (!isObj(e)) throw new ConfigError('$.embeddings');
  const profile = str(e['profile'], '$.embeddings.profile', 64);
  if (!PROFILE.test(profile)) throw new ConfigError('$.embeddings.profile');
  let embeddings: EmbeddingsConfig;
  if (profile === LOCAL_PROFILE) {
    only(e, ['profile'], [], '$.embeddings');
    embeddings = { profile };
  } else {
    only(e, ['profile', 'url', 'model'], ['tokenFile'], '$.embeddings');
    const url = str(e['url'], '$.embeddings.url');
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new ConfigError('$.embeddings.url');
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
      throw new ConfigError('$.embeddings.url');
    embeddings = {
      profile,
      url,
      model: str(e['model'], '$.embeddings.model', 255),
      ...(e['tokenFile'] !== undefined ? { tokenFile: str(e['tokenFile'], '$.embeddings.tokenFile') } : {}),
    };
  }
  const originsIn = value['allowedOrigins'] ?? [];
  if (!Array.isArray(originsIn) || originsIn.length > 64) throw new ConfigError('$.allowedOrigins');
  const allowedOrigins = originsIn.map((o, i) => {
    const s = str(o, `$.allowedOrigins[${i}]`, 512);
    let u: URL;
    try {
      u = new URL(s);
    } catch {
      throw new ConfigError(`$.allowedOrigins[${i}]`);
    }
    // An origin is scheme://host[:port] exactly, as browsers send it.
    if (u.origin !== s) throw new ConfigError(`$.allowedOrigins[${i}]`);
    return s;
  });
  const capability = value['capability'] ?? 'plain';
  if (!CAPABILITY_MODES.includes(capability as CapabilityMode)) throw new ConfigError('$.capability');
  // The pair is checked together: the projector's deadline must lie inside this server's window.
  const timing = checkLedgerTiming(value['ledger'], 'ledger')[0];
  if (timing) throw new ConfigError(`$.${timing.path}`);
  const ledger = ledgerTiming(value['ledger']) ?? DEFAULT_LEDGER_TIMING;
  return { version: 1, agents, embeddings, allowedOrigins, capability: capability as CapabilityMode, ledger };
}

export type ConfigTextResult =
  | { readonly ok: true; readonly config: RetrievalConfig }
  | {
      readonly ok: false;
      /** What is wrong, content-free: a JSON offset or the path of the offending field. */
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
        parsed.error === 'duplicate_name'
          ? 'a member name appears twice'
          : `not valid JSON at offset ${parsed.offset}`,
    };
  try {
    return { ok: true, config: parseConfig(parsed.value, options) };
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    const v = parsed.value;
    const agents = isObj(v) ? v['agents'] : undefined;
    if (!Array.isArray(agents)) return { ok: false, problem: `invalid value at ${err.path}` };
    const listed = new Set<string>();
    for (const a of agents)
      if (isObj(a) && typeof a['namespace'] === 'string' && typeof a['name'] === 'string')
        listed.add(agentKey({ namespace: a['namespace'], name: a['name'] }));
    return { ok: false, problem: `invalid value at ${err.path}`, listed };
  }
}
