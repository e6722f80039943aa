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
  compareAscii,
  isAllowedClassifications,
  isRoomId,
  parseStrictJson,
} from '../contract/index.ts';
import {
  agentLimit,
  CLIENT_TEXT_MAX,
  checkHttpUrl,
  checkIssuer,
  checkLabel,
  checkLocalGroups,
  checkPartnerGroups,
  checkPublicTimeout,
  claimedByOthers,
  compileBridgeRegex,
  formatProblems,
  groupCollisions,
  isClientText,
  isServerName,
  MAX_AGENTS,
  MAX_BRIDGED_ORIGINS,
  MAX_LOCAL_GROUPS,
  MAX_PARTNER_AGENTS,
  type Problems,
  partnerKey,
  problem,
} from '../rules/index.ts';
import {
  CAPABILITY_MODES,
  type CapabilityMode,
  checkLedgerTiming,
  DEFAULT_CAPABILITY,
  DEFAULT_LEDGER_TIMING,
  isCapabilityMode,
  type LedgerTiming,
  ledgerTiming,
} from '../rules/ledger.ts';
import { ConfigReader } from '../rules/reader.ts';

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

/** The room registry as the decisions read it: a `Map`, or the shards' maps behind one lookup (registry.ts). */
export interface RoomLookup {
  get(roomId: string): RoomEntry | undefined;
  has(roomId: string): boolean;
  readonly size: number;
  keys(): Iterable<string>;
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
  readonly rooms: RoomLookup;
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

/** A load error lists every problem (path, message, reason code); `error` is them on one line. */
export type ConfigResult = { ok: true; config: ProjectorConfig } | { ok: false; error: string; problems?: Problems };

/** Registry ceilings: well above 100,000 rooms and 5,000 partners, which the shards carry (registry.ts). */
export const MAX_ROOMS = 500_000;
export const MAX_PARTNERS = 50_000;

export const RESERVED_PATHS = new Set(['/healthz', '/readyz', '/metrics']);
const MAX_CONFIG_BYTES = 4 * 1024 * 1024;
const PATH_RE = /^\/[A-Za-z0-9._~!$&'()*+,;=:@/%-]{0,1023}$/;
const LIVE_TIMEOUT = { min: 10, max: 10_000, default: 150 } as const;

function label(r: ConfigReader, v: unknown, path: string): string | undefined {
  return r.checked<string>(v, checkLabel, path);
}

function routePath(r: ConfigReader, v: unknown, path: string): string | undefined {
  if (typeof v !== 'string' || !PATH_RE.test(v))
    return void r.report(problem('route-path', path, 'must be an absolute path without query'));
  if (RESERVED_PATHS.has(v)) return void r.report(problem('route-path', path, 'reserved path'));
  return v;
}

/** An operator's MXID regex, compiled under the one bridge-regex rule (rules/bridge.ts). */
function regex(r: ConfigReader, v: unknown, path: string): RegExp | undefined {
  const c = compileBridgeRegex(v);
  if (c instanceof RegExp) return c;
  return void r.report(problem('bridge-regex', path, `regex ${c.fault}`));
}

function classifications(r: ConfigReader, v: unknown, path: string): AllowedClassifications | undefined {
  if (isAllowedClassifications(v)) return [...v] as unknown as AllowedClassifications;
  return void r.report(problem('classifications', path, 'must be ["public"] or ["approved_non_public","public"]'));
}

function readBridge(r: ConfigReader, v: unknown): ProjectorConfig['bridge'] | undefined {
  const b = r.object(v, 'bridge', ['workload', 'localServer', 'serviceUserRegex', 'bridgedOrigins']);
  if (!b) return undefined;
  const workload = label(r, b['workload'], 'bridge.workload');
  const localServer = b['localServer'];
  if (typeof localServer !== 'string' || !isServerName(localServer))
    r.report(problem('server-name', 'bridge.localServer', 'not a Matrix server name'));
  const serviceUserRegex = regex(r, b['serviceUserRegex'], 'bridge.serviceUserRegex');
  const networks = new Set<string>();
  const bridgedOrigins: BridgedOrigin[] = [];
  (r.array(b['bridgedOrigins'], 'bridge.bridgedOrigins', MAX_BRIDGED_ORIGINS) ?? []).forEach((o, k) => {
    const p = `bridge.bridgedOrigins[${k}]`;
    const e = r.object(o, p, ['network', 'userIdRegex']);
    if (!e) return;
    const network = label(r, e['network'], `${p}.network`);
    if (network !== undefined && networks.has(network))
      r.report(problem('bridged-origins', `${p}.network`, 'duplicate network'));
    if (network !== undefined) networks.add(network);
    const userIdRegex = regex(r, e['userIdRegex'], `${p}.userIdRegex`);
    if (network !== undefined && userIdRegex) bridgedOrigins.push({ network, userIdRegex });
  });
  if (workload === undefined || !serviceUserRegex) return undefined;
  return { workload, localServer: localServer as string, serviceUserRegex, bridgedOrigins };
}

function readAgents(r: ConfigReader, v: unknown): AgentRoute[] {
  const list = r.array(v, 'agents', MAX_AGENTS + 1) ?? [];
  r.add(agentLimit(list.length, 'agents'));
  const owners = new Map<string, number>();
  const paths = new Map<string, number>();
  const agents: AgentRoute[] = [];
  list.forEach((a, k) => {
    const p = `agents[${k}]`;
    const e = r.object(a, p, ['namespace', 'name', 'localPath'], ['publicPath']);
    if (!e) return;
    const namespace = label(r, e['namespace'], `${p}.namespace`);
    const name = label(r, e['name'], `${p}.name`);
    const localPath = routePath(r, e['localPath'], `${p}.localPath`);
    const publicPath = e['publicPath'] === undefined ? undefined : routePath(r, e['publicPath'], `${p}.publicPath`);
    if (namespace === undefined || name === undefined || localPath === undefined) return;
    const key = `${namespace}/${name}`;
    r.add(claimedByOthers('agent-duplicate', p, owners.has(key) ? [`agents[${owners.get(key)}]`] : []));
    owners.set(key, k);
    for (const path of [localPath, publicPath]) {
      if (path === undefined) continue;
      if (paths.has(path)) r.report(problem('route-path', p, `duplicate route path (also agents[${paths.get(path)}])`));
      paths.set(path, k);
    }
    agents.push({ namespace, name, localPath, ...(publicPath === undefined ? {} : { publicPath }) });
  });
  return agents;
}

function readRooms(r: ConfigReader, v: unknown): Map<string, RoomEntry> {
  const rooms = new Map<string, RoomEntry>();
  const index = new Map<string, number>();
  (r.array(v, 'rooms', MAX_ROOMS) ?? []).forEach((x, k) => {
    const p = `rooms[${k}]`;
    const e = r.object(x, p, ['roomId', 'allowedClassifications']);
    if (!e) return;
    const roomId = e['roomId'];
    if (!isRoomId(roomId)) {
      r.report(problem('room-id', `${p}.roomId`, 'not a Matrix room ID'));
      return;
    }
    r.add(claimedByOthers('room-duplicate', `${p}.roomId`, index.has(roomId) ? [`rooms[${index.get(roomId)}]`] : []));
    index.set(roomId, k);
    const allowed = classifications(r, e['allowedClassifications'], `${p}.allowedClassifications`);
    if (allowed) rooms.set(roomId, { roomId, allowedClassifications: allowed });
  });
  return rooms;
}

const PARTNER_FIELDS = ['issuer', 'audience', 'azp', 'policyId', 'groups', 'allowedClassifications', 'agents'];

function readPartner(
  r: ConfigReader,
  c: unknown,
  p: string,
  localGroups: ReadonlySet<string>,
): PartnerEntry | undefined {
  const e = r.object(c, p, PARTNER_FIELDS);
  if (!e) return undefined;
  const issuerOk = r.add(checkIssuer(e['issuer'], `${p}.issuer`));
  for (const f of ['audience', 'azp'])
    if (!isClientText(e[f]))
      r.report(
        problem('client-id', `${p}.${f}`, `must be 1-${CLIENT_TEXT_MAX} printable ASCII characters without spaces`),
      );
  const policyId = r.checked<string>(
    e['policyId'],
    (v, q) => (checkLabel(v, q).length ? [problem('policy-id', q, 'must be a DNS-1123 label')] : []),
    `${p}.policyId`,
  );
  const groupsOk = r.add(checkPartnerGroups(e['groups'], e['policyId'], `${p}.groups`));
  if (groupsOk) r.add(groupCollisions(e['groups'] as string[], localGroups, `${p}.groups`, 'the local groups'));
  const allowed = classifications(r, e['allowedClassifications'], `${p}.allowedClassifications`);
  const refs = new Set<string>();
  const agents: { namespace: string; name: string }[] = [];
  (r.array(e['agents'], `${p}.agents`, MAX_PARTNER_AGENTS) ?? []).forEach((a, j) => {
    const q = `${p}.agents[${j}]`;
    const o = r.object(a, q, ['namespace', 'name']);
    const namespace = o && label(r, o['namespace'], `${q}.namespace`);
    const name = o && label(r, o['name'], `${q}.name`);
    if (namespace === undefined || name === undefined) return;
    if (refs.has(`${namespace}/${name}`)) r.report(problem('partner-agents', q, 'duplicate agent'));
    refs.add(`${namespace}/${name}`);
    agents.push({ namespace, name });
  });
  if (!issuerOk || !isClientText(e['audience']) || !isClientText(e['azp']) || !policyId || !groupsOk || !allowed)
    return undefined;
  return {
    issuer: e['issuer'] as string,
    audience: e['audience'],
    azp: e['azp'],
    policyId,
    groups: [...(e['groups'] as string[])].sort(compareAscii),
    allowedClassifications: allowed,
    agents,
  };
}

function readPartners(r: ConfigReader, v: unknown, localGroups: ReadonlySet<string>) {
  const partners: PartnerEntry[] = [];
  const partnerIndex = new Map<string, PartnerEntry[]>();
  const at = new Map<string, number>();
  (r.array(v, 'partners', MAX_PARTNERS) ?? []).forEach((c, k) => {
    const p = `partners[${k}]`;
    const entry = readPartner(r, c, p, localGroups);
    if (!entry) return;
    const key = partnerKey(entry.issuer, entry.audience, entry.azp);
    r.add(claimedByOthers('partner-duplicate', p, at.has(key) ? [`partners[${at.get(key)}]`] : []));
    at.set(key, k);
    partnerIndex.set(key, [entry]);
    partners.push(entry);
  });
  return { partners, partnerIndex };
}

function readLiveRoomCheck(r: ConfigReader, v: unknown): LiveRoomCheckConfig {
  if (v === undefined) return { enabled: false, timeoutMs: LIVE_TIMEOUT.default };
  const o = r.object(v, 'liveRoomCheck', ['enabled'], ['homeserverUrl', 'accessTokenFile', 'timeoutMs']);
  if (!o) return { enabled: false, timeoutMs: LIVE_TIMEOUT.default };
  const enabled = r.boolean(o['enabled'], 'liveRoomCheck.enabled') === true;
  // The one URL rule (rules/urls.ts): what the CRD admits, this server reads.
  r.add(checkHttpUrl(o['homeserverUrl'], 'liveRoomCheck.homeserverUrl'));
  const homeserverUrl = o['homeserverUrl'] as string | undefined;
  const accessTokenFile =
    o['accessTokenFile'] === undefined
      ? undefined
      : r.string(o['accessTokenFile'], 'liveRoomCheck.accessTokenFile', 4096);
  const t = o['timeoutMs'] ?? LIVE_TIMEOUT.default;
  if (typeof t !== 'number' || !Number.isInteger(t) || t < LIVE_TIMEOUT.min || t > LIVE_TIMEOUT.max)
    r.report(
      problem(
        'live-room-check',
        'liveRoomCheck.timeoutMs',
        `must be an integer ${LIVE_TIMEOUT.min}-${LIVE_TIMEOUT.max}`,
      ),
    );
  if (enabled && (homeserverUrl === undefined || o['accessTokenFile'] === undefined))
    r.report(problem('live-room-check', 'liveRoomCheck', 'enabled requires homeserverUrl and accessTokenFile'));
  return {
    enabled,
    timeoutMs: t as number,
    ...(homeserverUrl === undefined ? {} : { homeserverUrl }),
    ...(accessTokenFile === undefined ? {} : { accessTokenFile }),
  };
}

function readLocalGroups(r: ConfigReader, v: unknown): string[] {
  if (!Array.isArray(v)) {
    r.array(v, 'localGroups', MAX_LOCAL_GROUPS);
    return [];
  }
  r.add(checkLocalGroups(v, 'localGroups'));
  return v.filter((g): g is string => typeof g === 'string');
}

function readCapability(r: ConfigReader, v: unknown): CapabilityMode {
  if (v === undefined) return DEFAULT_CAPABILITY;
  if (isCapabilityMode(v)) return v;
  r.report(problem('capability', 'capability', `must be one of ${CAPABILITY_MODES.map((m) => `"${m}"`).join(', ')}`));
  return DEFAULT_CAPABILITY;
}

const ROOT_REQUIRED = [
  'version',
  'publicRetrievalTimeoutSeconds',
  'bridge',
  'agents',
  'rooms',
  'partners',
  'localGroups',
];

function read(v: unknown): ConfigResult {
  const r = new ConfigReader();
  const root = r.object(v, '', ROOT_REQUIRED, ['liveRoomCheck', 'capability', 'ledger']);
  if (!root) return failed(r.problems);
  if (root['version'] !== 1) r.report(problem('config-version', 'version', 'must be 1'));
  // Required here (the render always writes it); `object` reported it when missing.
  const timeout = root['publicRetrievalTimeoutSeconds'];
  r.add(checkPublicTimeout(timeout, 'publicRetrievalTimeoutSeconds'));
  const bridge = readBridge(r, root['bridge']);
  const agents = readAgents(r, root['agents']);
  const rooms = readRooms(r, root['rooms']);
  const localGroups = readLocalGroups(r, root['localGroups']);
  const { partners, partnerIndex } = readPartners(r, root['partners'], new Set(localGroups));
  const liveRoomCheck = readLiveRoomCheck(r, root['liveRoomCheck']);
  const capability = readCapability(r, root['capability']);
  r.add(checkLedgerTiming(root['ledger'], 'ledger'));
  const result = r.result<ProjectorConfig>(() => ({
    version: 1,
    publicRetrievalTimeoutSeconds: timeout as number,
    bridge: bridge as ProjectorConfig['bridge'],
    agents,
    rooms,
    partners,
    partnerIndex,
    localGroups,
    liveRoomCheck,
    capability,
    ledger: ledgerTiming(root['ledger']) ?? DEFAULT_LEDGER_TIMING,
  }));
  return result.ok ? { ok: true, config: result.value } : failed(result.problems);
}

function failed(problems: Problems): ConfigResult {
  return { ok: false, error: formatProblems(problems), problems };
}

/** Validate an already parsed configuration object. Never throws. */
export function validateConfig(v: unknown): ConfigResult {
  try {
    return read(v);
  } catch {
    return failed([problem('schema', '', 'invalid configuration')]);
  }
}

/** Parse projector.json text strictly (duplicate names and trailing data fail). Never throws. */
export function parseConfig(text: string): ConfigResult {
  if (text.length > MAX_CONFIG_BYTES) return failed([problem('schema', '', 'configuration too large')]);
  const parsed = parseStrictJson(text, { maxDepth: 16, maxLength: MAX_CONFIG_BYTES });
  if (!parsed.ok) return failed([problem('schema', '', `not strict JSON (${parsed.error} at ${parsed.offset})`)]);
  return validateConfig(parsed.value);
}
