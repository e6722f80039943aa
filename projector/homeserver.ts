/**
 * Optional live room-state check (ADR 0017 "Matrix snapshot and delivery"; docs/decisions.md#d10-runtime-and-dependencies).
 *
 * Right before minting a Matrix projection, re-read the room's authorization-relevant current state
 * from the homeserver's client-server API (matrix-js-sdk, no sync), rebuild the snapshot with the
 * contract module, classify every joined member from the trusted configuration, recompute
 * `state_sha256` and the audience, and deny on any difference from the room context, on any policy
 * failure, and on any read failure or timeout.
 *
 * `snapshotFromState` and `compareLiveState` are pure; the reader is the only I/O.
 */
import { readFileSync } from 'node:fs';
import { errorFields } from '../common/error-fields.ts';
import { createLogger } from '../common/log.ts';
import {
  checkSnapshotPolicy,
  comparePrincipals,
  isFullMxid,
  isPlainObject,
  type JoinedMember,
  type RoomContext,
  type RoomSnapshot,
  stateDigest,
  validateSnapshot,
} from '../contract/index.ts';
import { classifyMxid } from './classify.ts';
import type { ProjectorConfig, RoomEntry } from './config.ts';

const log = createLogger('projector');

/** The two client-server reads: `GET /rooms/{id}/state` and `GET /rooms/{id}/joined_members`. */
export interface RawRoomState {
  readonly events: readonly unknown[];
  readonly joined: readonly string[];
}

export interface RoomStateReader {
  readRoomState(roomId: string): Promise<RawRoomState>;
  /**
   * Resolves once everything a read needs is loaded (client library, HTTP stack). Awaited before the
   * deadline starts, so a cold process never spends a check's budget on loading code.
   */
  warm?(): Promise<void>;
  /** Whether `warm()` has completed; a reader without `warm` is always warm. */
  isWarm?(): boolean;
}

export type LiveResult =
  | { readonly ok: true }
  | { readonly ok: false; readonly reason: 'state_drift' | 'homeserver_unavailable' };

const DRIFT = { ok: false, reason: 'state_drift' } as const;
const UNAVAILABLE = { ok: false, reason: 'homeserver_unavailable' } as const;

interface StateEvent {
  readonly type: string;
  readonly state_key: string;
  readonly event_id: string;
  readonly content: Record<string, unknown>;
}

function asStateEvent(v: unknown): StateEvent | undefined {
  if (!isPlainObject(v)) return undefined;
  const { type, state_key, event_id, content } = v;
  if (typeof type !== 'string' || typeof state_key !== 'string' || typeof event_id !== 'string') return undefined;
  if (!isPlainObject(content)) return undefined;
  return { type, state_key, event_id, content };
}

function stringList(v: unknown): string[] | undefined {
  if (v === undefined) return [];
  if (!Array.isArray(v) || v.length > 1000 || !v.every((s) => typeof s === 'string' && s.length > 0 && s.length <= 255))
    return undefined;
  return [...new Set(v as string[])].sort();
}

/**
 * Build the ADR snapshot from raw client-server state. Returns undefined for anything incomplete,
 * repeated, inconsistent or unclassifiable: the caller denies.
 */
export function snapshotFromState(
  raw: RawRoomState,
  config: ProjectorConfig,
  room: RoomEntry,
): RoomSnapshot | undefined {
  if (!Array.isArray(raw.events) || !Array.isArray(raw.joined)) return undefined;
  const seen = new Set<string>();
  const byType = new Map<string, StateEvent>();
  const members: JoinedMember[] = [];
  for (const e of raw.events) {
    const ev = asStateEvent(e);
    if (ev === undefined) return undefined;
    const key = JSON.stringify([ev.type, ev.state_key]);
    if (seen.has(key)) return undefined; // current state has one event per (type, state_key)
    seen.add(key);
    if (ev.type === 'm.room.member') {
      if (ev.content['membership'] !== 'join') continue;
      if (!isFullMxid(ev.state_key)) return undefined;
      const c = classifyMxid(config, ev.state_key);
      if (c.kind === 'ambiguous') return undefined;
      members.push(
        c.kind === 'bridged_matrix'
          ? { event_id: ev.event_id, kind: c.kind, network: c.network, principal: ev.state_key }
          : { event_id: ev.event_id, kind: c.kind, principal: ev.state_key },
      );
    } else if (ev.state_key === '') {
      byType.set(ev.type, ev);
    }
  }
  // The member list and the joined_members view must agree exactly.
  const joinedSet = new Set(raw.joined);
  if (joinedSet.size !== raw.joined.length || joinedSet.size !== members.length) return undefined;
  if (!members.every((m) => joinedSet.has(m.principal))) return undefined;
  members.sort(comparePrincipals);

  const create = byType.get('m.room.create');
  const joinRules = byType.get('m.room.join_rules');
  const history = byType.get('m.room.history_visibility');
  if (!create || !joinRules || !history) return undefined;
  const federateRaw = create.content['m.federate'];
  if (federateRaw !== undefined && typeof federateRaw !== 'boolean') return undefined;
  const joinRule = joinRules.content['join_rule'];
  const visibility = history.content['history_visibility'];
  if (typeof joinRule !== 'string' || typeof visibility !== 'string') return undefined;

  let serverAcl: RoomSnapshot['server_acl'] = null;
  const acl = byType.get('m.room.server_acl');
  if (acl) {
    const allow = stringList(acl.content['allow']);
    const deny = stringList(acl.content['deny']);
    const ipRaw = acl.content['allow_ip_literals'];
    if (!allow || !deny || (ipRaw !== undefined && typeof ipRaw !== 'boolean')) return undefined;
    // The Matrix default for allow_ip_literals is true; the snapshot makes it explicit.
    serverAcl = { allow, allow_ip_literals: ipRaw ?? true, deny, event_id: acl.event_id };
  }

  const checked = validateSnapshot({
    allowed_classifications: [...room.allowedClassifications],
    create: { event_id: create.event_id, federate: federateRaw ?? true },
    history_visibility: { event_id: history.event_id, value: visibility },
    join_rule: { event_id: joinRules.event_id, value: joinRule },
    joined: members,
    room_id: room.roomId,
    server_acl: serverAcl,
  });
  return checked.ok ? checked.value : undefined;
}

/** Compare the live snapshot with the room context the bridge sent. */
export function compareLiveState(
  raw: RawRoomState,
  config: ProjectorConfig,
  room: RoomEntry,
  context: RoomContext,
): LiveResult {
  const snapshot = snapshotFromState(raw, config, room);
  if (snapshot === undefined) return DRIFT;
  const policy = checkSnapshotPolicy(snapshot, {
    localServer: config.bridge.localServer,
    caller: context.caller,
  });
  if (!policy.ok) return DRIFT;
  if (stateDigest(snapshot) !== context.room.state_sha256) return DRIFT;
  const audience = policy.value;
  if (audience.length !== context.audience.length) return DRIFT;
  for (let k = 0; k < audience.length; k++) {
    if (comparePrincipals(audience[k]!, context.audience[k]!) !== 0) return DRIFT;
  }
  return { ok: true };
}

/** Run the live check with a hard deadline; every failure denies. */
export async function liveRoomCheck(
  reader: RoomStateReader,
  config: ProjectorConfig,
  room: RoomEntry,
  context: RoomContext,
  timeoutMs: number,
): Promise<LiveResult> {
  let timer: NodeJS.Timeout | undefined;
  try {
    // Loading is local work with its own bound (the module load), not homeserver latency.
    if (reader.warm && !reader.isWarm?.()) await reader.warm();
    const deadline = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    const raw = await Promise.race([reader.readRoomState(room.roomId), deadline]);
    if (raw === 'timeout') return UNAVAILABLE;
    return compareLiveState(raw, config, room, context);
  } catch (err) {
    // Unavailable (deny) whatever failed; the class and code tell an outage from a client bug.
    log.warn('live room-state read failed', errorFields(err));
    return UNAVAILABLE;
  } finally {
    if (timer) clearTimeout(timer);
  }
}

const silentLogger = {
  trace() {},
  debug() {},
  info() {},
  warn() {},
  error() {},
  getChild() {
    return silentLogger;
  },
};

type MatrixSdk = typeof import('matrix-js-sdk');
type SdkLoader = () => Promise<Pick<MatrixSdk, 'createClient'>>;

let sdkModule: Promise<MatrixSdk> | undefined;

/**
 * matrix-js-sdk and Node's fetch, loaded once per process. Importing the SDK takes hundreds of
 * milliseconds (more on a busy node) and Node initialises its HTTP client on the first fetch; both
 * happen here, never inside a check's deadline. A `data:` URL exercises fetch without any network.
 */
export function loadMatrixSdk(): Promise<MatrixSdk> {
  if (sdkModule) return sdkModule;
  const loading = (async () => {
    const sdk = await import('matrix-js-sdk');
    await (await fetch('data:,')).arrayBuffer();
    return sdk;
  })();
  sdkModule = loading;
  // A failed load is retried by the next caller rather than cached forever.
  loading.catch(() => {
    if (sdkModule === loading) sdkModule = undefined;
  });
  return loading;
}

/**
 * A reader over matrix-js-sdk's MatrixClient without sync: `roomState` and `getJoinedRoomMembers`.
 * Loading starts as soon as the reader exists (only processes with the live check enabled create
 * one); `warm()` resolves when the client is built.
 */
export function matrixSdkReader(options: {
  baseUrl: string;
  accessToken: string;
  timeoutMs: number;
  /** Module loader override (tests); default: `loadMatrixSdk`. */
  load?: SdkLoader;
}): RoomStateReader {
  type Client = {
    roomState(roomId: string): Promise<unknown[]>;
    getJoinedRoomMembers(roomId: string): Promise<{ joined: Record<string, unknown> }>;
  };
  let built: Client | undefined;
  let pending: Promise<Client> | undefined;
  const getClient = (): Promise<Client> => {
    if (built) return Promise.resolve(built);
    pending ??= (options.load ?? loadMatrixSdk)().then(
      (sdk) => {
        built = sdk.createClient({
          baseUrl: options.baseUrl,
          accessToken: options.accessToken,
          localTimeoutMs: options.timeoutMs,
          logger: silentLogger,
        }) as Client;
        return built;
      },
      (err: unknown) => {
        pending = undefined;
        throw err;
      },
    );
    return pending;
  };
  // Start loading now; a failure here is reported by the next warm() or read, which retries.
  getClient().catch(() => {});
  return {
    async warm() {
      await getClient();
    },
    isWarm: () => built !== undefined,
    async readRoomState(roomId) {
      const c = await getClient();
      const [events, members] = await Promise.all([c.roomState(roomId), c.getJoinedRoomMembers(roomId)]);
      if (!Array.isArray(events) || !isPlainObject(members) || !isPlainObject(members.joined))
        throw new Error('malformed homeserver response');
      return { events, joined: Object.keys(members.joined) };
    },
  };
}

/**
 * The reader while the token is unusable: every read fails with why, as a code the room-check log
 * shows (an errno such as ENOENT or EACCES from reading the file, or TOKEN_INVALID).
 */
function failingReader(code: string): RoomStateReader & { readonly failing: true } {
  return {
    failing: true,
    readRoomState: () => Promise.reject(Object.assign(new Error('homeserver token unavailable'), { code })),
  };
}

/**
 * The production reader for the current configuration: matrix-js-sdk with the access token read
 * from `liveRoomCheck.accessTokenFile`. The token file is re-read when the configuration changes and
 * at most every `tokenRefreshMs` otherwise (Secret rotation); an unreadable or empty token yields a
 * reader that always fails (deny) and makes `usable` false (not ready).
 */
export class ConfiguredReader {
  private generation = -1;
  private token: string | undefined;
  private readAt = 0;
  private reader: RoomStateReader | undefined;

  constructor(
    private readonly tokenRefreshMs = 10_000,
    /** Module loader override (tests); default: `loadMatrixSdk`. */
    private readonly load?: SdkLoader,
  ) {}

  get(config: ProjectorConfig, generation: number): RoomStateReader | undefined {
    const live = config.liveRoomCheck;
    if (!live.enabled || !live.homeserverUrl || !live.accessTokenFile) return undefined;
    const now = Date.now();
    if (generation === this.generation && now - this.readAt < this.tokenRefreshMs && this.reader) return this.reader;
    let token: string | undefined;
    let fault = 'TOKEN_INVALID';
    try {
      token = readFileSync(live.accessTokenFile, 'utf8').trim();
    } catch (e) {
      token = undefined;
      fault = errorFields(e).code ?? 'TOKEN_UNREADABLE';
    }
    if (token !== undefined && (token.length === 0 || /[\s\x00-\x1f\x7f]/.test(token))) token = undefined;
    if (generation !== this.generation || token !== this.token || !this.reader) {
      this.reader =
        token === undefined
          ? failingReader(fault)
          : matrixSdkReader({
              baseUrl: live.homeserverUrl,
              accessToken: token,
              timeoutMs: live.timeoutMs,
              ...(this.load ? { load: this.load } : {}),
            });
    }
    this.generation = generation;
    this.token = token;
    this.readAt = now;
    return this.reader;
  }

  /**
   * Whether the live check can run at all (token present) and its client is loaded; false makes
   * /readyz fail, so a rollout sends no traffic to a replica that would deny while cold.
   */
  usable(config: ProjectorConfig, generation: number): boolean {
    const r = this.get(config, generation);
    if (r === undefined) return true;
    if ('failing' in r) return false;
    return r.isWarm?.() ?? true;
  }
}
