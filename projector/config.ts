/**
 * projector.json: strict parsing and validation. Pure: no I/O (the reloading file store is in
 * config-store.ts), so the decision modules that import these types load no file-system code.
 *
 * Shape: docs/interfaces.md "Projector configuration file". Unknown fields, wrong types, unsafe
 * regexes, duplicate rooms/agents/paths, overlapping partner keys, partner groups outside their
 * policy and partner/local group collisions are load errors. A load error never leaves an older file
 * half-applied: the store switches to deny-all and reports not ready until a valid file appears.
 */
import {
  type AllowedClassifications,
  checkPartnerGroups,
  compareAscii,
  isAllowedClassifications,
  isDns1123Label,
  isPlainObject,
  isRoomId,
  isServerName,
  type JsonValue,
  parseStrictJson,
  utf8Length,
} from '../contract/index.ts';
import {
  CLIENT_TEXT_MAX,
  compileBridgeRegex,
  ISSUER_MAX,
  isClientText,
  isIssuer,
  isLocalGroup,
  isValidTimeoutSetting,
  MAX_AGENTS,
  MAX_BRIDGED_ORIGINS,
  MAX_LOCAL_GROUPS,
  MAX_PARTNER_AGENTS,
  PARTNER_PREFIX,
  PUBLIC_TIMEOUT,
  partnerKey,
} from '../rules/index.ts';
import {
  CAPABILITY_MODES,
  type CapabilityMode,
  checkLedgerTiming,
  DEFAULT_CAPABILITY,
  isCapabilityMode,
  type LedgerTiming,
  ledgerTiming,
} from '../rules/ledger.ts';

// The decision modules read these through this module; they are the rules/ definitions.
export { isValidTimeoutSetting, partnerKey } from '../rules/index.ts';

export interface BridgedOrigin {
  readonly network: string;
  readonly userIdRegex: RegExp;
}

export interface AgentRoute {
  readonly namespace: string;
  readonly name: string;
  readonly localPath: string;
  readonly publicPath?: string;
}

export interface RoomEntry {
  readonly roomId: string;
  readonly allowedClassifications: AllowedClassifications;
}

export interface PartnerEntry {
  readonly issuer: string;
  readonly audience: string;
  readonly azp: string;
  readonly policyId: string;
  readonly groups: readonly string[];
  readonly allowedClassifications: AllowedClassifications;
  readonly agents: readonly { readonly namespace: string; readonly name: string }[];
}

export interface LiveRoomCheckConfig {
  readonly enabled: boolean;
  readonly homeserverUrl?: string;
  readonly accessTokenFile?: string;
  /** Budget for the whole live read; default 150 ms (agentgateway's check budget is 200 ms). */
  readonly timeoutMs: number;
}

export interface ProjectorConfig {
  readonly version: 1;
  readonly publicRetrievalTimeoutSeconds: number;
  readonly bridge: {
    readonly workload: string;
    readonly localServer: string;
    readonly serviceUserRegex: RegExp;
    readonly bridgedOrigins: readonly BridgedOrigin[];
  };
  readonly agents: readonly AgentRoute[];
  readonly rooms: ReadonlyMap<string, RoomEntry>;
  readonly partners: readonly PartnerEntry[];
  /** (issuer, audience, azp) → entries; the loader guarantees at most one per key. */
  readonly partnerIndex: ReadonlyMap<string, readonly PartnerEntry[]>;
  readonly localGroups: readonly string[];
  readonly liveRoomCheck: LiveRoomCheckConfig;
  /** `ledger`: every minted value is recorded in the capability ledger first (docs/ledger.md). Absent: `plain`. */
  readonly capability: CapabilityMode;
  /** Ledger timing, defaults filled in (rules/ledger.ts); the projector uses the record deadline. */
  readonly ledger: LedgerTiming;
}

export type ConfigResult = { ok: true; config: ProjectorConfig } | { ok: false; error: string };

/** Registry ceilings: well above 100,000 rooms and 5,000 partners, which the shards carry (registry.ts). */
export const MAX_ROOMS = 500_000;
export const MAX_PARTNERS = 50_000;

export const RESERVED_PATHS = new Set(['/healthz', '/readyz', '/metrics']);
const MAX_CONFIG_BYTES = 4 * 1024 * 1024;
const PATH_RE = /^\/[A-Za-z0-9._~!$&'()*+,;=:@/%-]{0,1023}$/;

class ConfigError extends Error {}

function fail(path: string, what: string): never {
  throw new ConfigError(`${path}: ${what}`);
}

type Obj = { [key: string]: JsonValue };

function obj(v: JsonValue | undefined, path: string, required: string[], optional: string[] = []): Obj {
  if (!isPlainObject(v)) fail(path, 'must be an object');
  for (const key of Object.keys(v)) {
    if (!required.includes(key) && !optional.includes(key)) fail(`${path}.${key}`, 'unknown field');
  }
  for (const key of required) if (!Object.hasOwn(v, key)) fail(`${path}.${key}`, 'required');
  return v;
}

function str(v: JsonValue | undefined, path: string, maxBytes = 255): string {
  if (typeof v !== 'string' || v.length === 0 || utf8Length(v) > maxBytes) fail(path, 'must be a string');
  // No control characters: these values are compared with header values.
  if (/[\x00-\x1f\x7f]/.test(v)) fail(path, 'control character');
  return v;
}

function arr(v: JsonValue | undefined, path: string, max = 10000): JsonValue[] {
  if (!Array.isArray(v)) fail(path, 'must be an array');
  if (v.length > max) fail(path, `must hold at most ${max} entries`);
  return v;
}

function label(v: JsonValue | undefined, path: string): string {
  if (!isDns1123Label(v)) fail(path, 'must be a DNS-1123 label');
  return v;
}

function routePath(v: JsonValue | undefined, path: string): string {
  if (typeof v !== 'string' || !PATH_RE.test(v)) fail(path, 'must be an absolute path without query');
  if (RESERVED_PATHS.has(v)) fail(path, 'reserved path');
  return v;
}

/** An operator's MXID regex, compiled under the one bridge-regex rule (rules/bridge.ts). */
export function compileSafeRegex(v: JsonValue | undefined, path: string): RegExp {
  const r = compileBridgeRegex(v);
  if (r instanceof RegExp) return r;
  return fail(path, `regex ${r.fault}`);
}

function classifications(v: JsonValue | undefined, path: string): AllowedClassifications {
  if (!isAllowedClassifications(v)) fail(path, 'must be ["public"] or ["approved_non_public","public"]');
  return [...v] as unknown as AllowedClassifications;
}

function parseLiveRoomCheck(v: JsonValue | undefined): LiveRoomCheckConfig {
  if (v === undefined) return { enabled: false, timeoutMs: 150 };
  const o = obj(v, 'liveRoomCheck', ['enabled'], ['homeserverUrl', 'accessTokenFile', 'timeoutMs']);
  if (typeof o['enabled'] !== 'boolean') fail('liveRoomCheck.enabled', 'must be a boolean');
  let homeserverUrl: string | undefined;
  if (o['homeserverUrl'] !== undefined) {
    homeserverUrl = str(o['homeserverUrl'], 'liveRoomCheck.homeserverUrl', 2048);
    let u: URL;
    try {
      u = new URL(homeserverUrl);
    } catch {
      fail('liveRoomCheck.homeserverUrl', 'must be a URL');
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      fail('liveRoomCheck.homeserverUrl', 'http(s) only');
    if (u.username || u.password || u.search || u.hash)
      fail('liveRoomCheck.homeserverUrl', 'plain origin only');
  }
  const accessTokenFile =
    o['accessTokenFile'] === undefined
      ? undefined
      : str(o['accessTokenFile'], 'liveRoomCheck.accessTokenFile', 4096);
  let timeoutMs = 150;
  if (o['timeoutMs'] !== undefined) {
    const t = o['timeoutMs'];
    if (typeof t !== 'number' || !Number.isInteger(t) || t < 10 || t > 10000)
      fail('liveRoomCheck.timeoutMs', 'must be an integer 10–10000');
    timeoutMs = t;
  }
  if (o['enabled'] && (homeserverUrl === undefined || accessTokenFile === undefined))
    fail('liveRoomCheck', 'enabled requires homeserverUrl and accessTokenFile');
  return {
    enabled: o['enabled'],
    timeoutMs,
    ...(homeserverUrl === undefined ? {} : { homeserverUrl }),
    ...(accessTokenFile === undefined ? {} : { accessTokenFile }),
  };
}

/** Validate an already parsed configuration object. Never throws. */
export function validateConfig(v: unknown): ConfigResult {
  try {
    return { ok: true, config: build(v as JsonValue) };
  } catch (e) {
    if (e instanceof ConfigError) return { ok: false, error: e.message };
    return { ok: false, error: 'invalid configuration' };
  }
}

/** Parse projector.json text strictly (duplicate names and trailing data fail). Never throws. */
export function parseConfig(text: string): ConfigResult {
  if (text.length > MAX_CONFIG_BYTES) return { ok: false, error: 'configuration too large' };
  const parsed = parseStrictJson(text, { maxDepth: 16, maxLength: MAX_CONFIG_BYTES });
  if (!parsed.ok) return { ok: false, error: `not strict JSON (${parsed.error} at ${parsed.offset})` };
  return validateConfig(parsed.value);
}

function build(v: JsonValue): ProjectorConfig {
  const root = obj(
    v,
    '$',
    ['version', 'publicRetrievalTimeoutSeconds', 'bridge', 'agents', 'rooms', 'partners', 'localGroups'],
    ['liveRoomCheck', 'capability', 'ledger'],
  );
  if (root['version'] !== 1) fail('version', 'must be 1');
  const timeout = root['publicRetrievalTimeoutSeconds'];
  if (!isValidTimeoutSetting(timeout))
    fail('publicRetrievalTimeoutSeconds', `must be an integer ${PUBLIC_TIMEOUT.min}–${PUBLIC_TIMEOUT.max}`);

  const b = obj(root['bridge'], 'bridge', ['workload', 'localServer', 'serviceUserRegex', 'bridgedOrigins']);
  const workload = str(b['workload'], 'bridge.workload', 253);
  const localServer = str(b['localServer'], 'bridge.localServer');
  if (!isServerName(localServer)) fail('bridge.localServer', 'must be a Matrix server name');
  const serviceUserRegex = compileSafeRegex(b['serviceUserRegex'], 'bridge.serviceUserRegex');
  const networks = new Set<string>();
  const bridgedOrigins = arr(b['bridgedOrigins'], 'bridge.bridgedOrigins', MAX_BRIDGED_ORIGINS).map(
    (o, k) => {
      const p = `bridge.bridgedOrigins[${k}]`;
      const e = obj(o, p, ['network', 'userIdRegex']);
      const network = label(e['network'], `${p}.network`);
      if (networks.has(network)) fail(`${p}.network`, 'duplicate network');
      networks.add(network);
      return { network, userIdRegex: compileSafeRegex(e['userIdRegex'], `${p}.userIdRegex`) };
    },
  );

  const agentKeys = new Set<string>();
  const paths = new Set<string>();
  const agents = arr(root['agents'], 'agents', MAX_AGENTS).map((a, k): AgentRoute => {
    const p = `agents[${k}]`;
    const e = obj(a, p, ['namespace', 'name', 'localPath'], ['publicPath']);
    const namespace = label(e['namespace'], `${p}.namespace`);
    const name = label(e['name'], `${p}.name`);
    const key = `${namespace}/${name}`;
    if (agentKeys.has(key)) fail(p, 'duplicate agent');
    agentKeys.add(key);
    const localPath = routePath(e['localPath'], `${p}.localPath`);
    const publicPath =
      e['publicPath'] === undefined ? undefined : routePath(e['publicPath'], `${p}.publicPath`);
    for (const path of [localPath, publicPath]) {
      if (path === undefined) continue;
      if (paths.has(path)) fail(p, 'duplicate route path');
      paths.add(path);
    }
    return { namespace, name, localPath, ...(publicPath === undefined ? {} : { publicPath }) };
  });

  const rooms = new Map<string, RoomEntry>();
  arr(root['rooms'], 'rooms', MAX_ROOMS).forEach((r, k) => {
    const p = `rooms[${k}]`;
    const e = obj(r, p, ['roomId', 'allowedClassifications']);
    if (!isRoomId(e['roomId'])) fail(`${p}.roomId`, 'must be a room ID');
    const roomId = e['roomId'];
    if (rooms.has(roomId)) fail(p, 'duplicate room');
    rooms.set(roomId, { roomId, allowedClassifications: classifications(e['allowedClassifications'], p) });
  });

  const localGroups = arr(root['localGroups'], 'localGroups', MAX_LOCAL_GROUPS).map((g, k) => {
    if (typeof g === 'string' && g.startsWith(PARTNER_PREFIX))
      fail(`localGroups[${k}]`, 'local group in the partner namespace');
    if (!isLocalGroup(g)) fail(`localGroups[${k}]`, 'must be a local group name');
    return g;
  });
  if (new Set(localGroups).size !== localGroups.length) fail('localGroups', 'duplicate group');
  const localGroupSet = new Set(localGroups);

  const partnerIndex = new Map<string, PartnerEntry[]>();
  const partners = arr(root['partners'], 'partners', MAX_PARTNERS).map((c, k): PartnerEntry => {
    const p = `partners[${k}]`;
    const e = obj(c, p, [
      'issuer',
      'audience',
      'azp',
      'policyId',
      'groups',
      'allowedClassifications',
      'agents',
    ]);
    const issuer = e['issuer'];
    if (!isIssuer(issuer)) fail(`${p}.issuer`, `must be an https URL of at most ${ISSUER_MAX} characters`);
    // What the projection can carry (rules/partners.ts); anything else would deny at run time.
    const audience = e['audience'];
    if (!isClientText(audience))
      fail(`${p}.audience`, `must be 1–${CLIENT_TEXT_MAX} printable ASCII, no space`);
    const azp = e['azp'];
    if (!isClientText(azp)) fail(`${p}.azp`, `must be 1–${CLIENT_TEXT_MAX} printable ASCII, no space`);
    const policyId = label(e['policyId'], `${p}.policyId`);
    const groupsIn = arr(e['groups'], `${p}.groups`, 16);
    if (!groupsIn.every((g) => typeof g === 'string')) fail(`${p}.groups`, 'must be strings');
    const sorted = [...(groupsIn as string[])].sort(compareAscii);
    const groups = checkPartnerGroups(sorted, policyId, `${p}.groups`);
    if ('ok' in groups) fail(`${p}.groups`, 'must be 1–16 unique partner/<policyId>/<group> names');
    for (const g of groups) if (localGroupSet.has(g)) fail(`${p}.groups`, 'collides with a local group');
    const agentRefs = new Set<string>();
    const partnerAgents = arr(e['agents'], `${p}.agents`, MAX_PARTNER_AGENTS).map((a, j) => {
      const q = `${p}.agents[${j}]`;
      const r = obj(a, q, ['namespace', 'name']);
      const ref = { namespace: label(r['namespace'], `${q}.namespace`), name: label(r['name'], `${q}.name`) };
      const key = `${ref.namespace}/${ref.name}`;
      if (agentRefs.has(key)) fail(q, 'duplicate agent');
      agentRefs.add(key);
      return ref;
    });
    const entry: PartnerEntry = {
      issuer,
      audience,
      azp,
      policyId,
      groups,
      allowedClassifications: classifications(e['allowedClassifications'], p),
      agents: partnerAgents,
    };
    const key = partnerKey(issuer, audience, azp);
    if (partnerIndex.has(key)) fail(p, 'overlapping partner mapping (same issuer, audience, azp)');
    partnerIndex.set(key, [entry]);
    return entry;
  });

  return {
    version: 1,
    publicRetrievalTimeoutSeconds: timeout,
    bridge: { workload, localServer, serviceUserRegex, bridgedOrigins },
    agents,
    rooms,
    partners,
    partnerIndex,
    localGroups,
    liveRoomCheck: parseLiveRoomCheck(root['liveRoomCheck']),
    capability: parseCapability(root['capability']),
    ledger: parseLedgerTiming(root['ledger']),
  };
}

function parseLedgerTiming(v: JsonValue | undefined): LedgerTiming {
  const p = checkLedgerTiming(v, 'ledger')[0];
  if (p) fail(p.path, p.message);
  return ledgerTiming(v) ?? fail('ledger', 'invalid');
}

function parseCapability(v: JsonValue | undefined): CapabilityMode {
  if (v === undefined) return DEFAULT_CAPABILITY;
  if (isCapabilityMode(v)) return v;
  return fail('capability', `must be one of ${CAPABILITY_MODES.map((m) => `"${m}"`).join(', ')}`);
}
