/**
 * Local (Matrix bridge) route decision, ADR 0017 decision 4 and "Projection contract" (docs/decisions.md#adr-4). Pure: plain
 * inputs in, an allow with both response headers or a content-free denial out.
 *
 * Classification rule: the room context must carry exactly the registry's classifications. A wider
 * request is `classification_widened`; a narrower one is `classification_mismatch` and also denies
 * (fail closed: the bridge reads the same registry, so any difference means the two disagree).
 */
import {
  decodeRoomContext,
  encodeProjection,
  isFullMxid,
  type MatrixPrincipal,
  type MatrixProjection,
  type RoomContext,
} from '../contract/index.ts';
import { IDENTITY_HEADER } from '../rules/index.ts';
import { classifyMxid, matchesClassification } from './classify.ts';
import type { AgentRoute, ProjectorConfig, RoomEntry } from './config.ts';
import type { DenyReason } from './reasons.ts';
import { CHECK, type CheckRequest, checkCount, type IdentityHeaders, openCheck, RAW, single } from './request.ts';

export const MATRIX_LIFETIME_SECONDS = 600;

export type MatrixDecision =
  | {
      readonly allow: true;
      readonly headers: IdentityHeaders;
      readonly agent: AgentRoute;
      /** What a live room-state check compares against. */
      readonly context: RoomContext;
      readonly room: RoomEntry;
    }
  | { readonly allow: false; readonly reason: DenyReason; readonly agent?: AgentRoute };

function no(reason: DenyReason, agent?: AgentRoute): MatrixDecision {
  return agent === undefined ? { allow: false, reason } : { allow: false, reason, agent };
}

export interface MatrixOptions {
  /** Current Unix time, seconds. */
  readonly now: number;
}

/**
 * The readers' kinds against the trusted configuration (bridged origins, the bridge's own service
 * users): a member the configuration classifies otherwise than the room state says is refused.
 * `explain` judges a room with this same function (explain/subject.ts).
 */
export function audienceDenial(
  config: ProjectorConfig,
  audience: readonly MatrixPrincipal[],
): 'audience_service' | 'audience_kind' | undefined {
  for (const member of audience) {
    const c = classifyMxid(config, member.principal);
    if (c.kind === 'bridge_service') return 'audience_service';
    if (c.kind === 'ambiguous' || !matchesClassification(member, c)) return 'audience_kind';
  }
  return undefined;
}

/** The room's claimed classifications against the registry's: exactly equal, or refused. */
export function ceilingDenial(
  registry: readonly string[],
  claimed: readonly string[],
): 'classification_widened' | 'classification_mismatch' | undefined {
  if (claimed.length > registry.length) return 'classification_widened';
  if (claimed.length < registry.length) return 'classification_mismatch';
  return undefined;
}

export function decideMatrix(req: CheckRequest, config: ProjectorConfig, options: MatrixOptions): MatrixDecision {
  const agentGot = openCheck(req, config, 'local');
  if (!agentGot.ok) return no(agentGot.reason);
  const agent = agentGot.value;

  const workload = single(req, CHECK.workload, 'missing', 'workload');
  if (!workload.ok) return no(workload.reason, agent);
  if (workload.value !== config.bridge.workload) return no('workload', agent);

  // Raw counts first: a missing or duplicate raw header fails before anything is decoded.
  const userCount = checkCount(req, CHECK.userIdCount);
  if (userCount) return no(userCount.reason, agent);
  const ctxCount = checkCount(req, CHECK.roomContextCount);
  if (ctxCount) return no(ctxCount.reason, agent);

  const userId = single(req, RAW.userId, 'missing', 'duplicate');
  if (!userId.ok) return no(userId.reason, agent);
  if (!isFullMxid(userId.value)) return no('principal', agent);

  const decoded = decodeRoomContext(req.headers[RAW.roomContext]);
  if (!decoded.ok) return no(decoded.reason, agent);
  const ctx = decoded.value;
  if (ctx.caller.principal !== userId.value) return no('caller_mismatch', agent);

  // Kinds come from the trusted configuration; the bridge's claim must agree or the request denies.
  const callerClass = classifyMxid(config, ctx.caller.principal);
  if (callerClass.kind === 'bridge_service' || callerClass.kind === 'ambiguous') return no('caller_kind', agent);
  if (!matchesClassification(ctx.caller, callerClass)) return no('caller_kind', agent);
  const audience = audienceDenial(config, ctx.audience);
  if (audience) return no(audience, agent);

  const room = config.rooms.get(ctx.room.id);
  if (room === undefined) return no('room_unregistered', agent);
  const want = room.allowedClassifications;
  const ceiling = ceilingDenial(want, ctx.allowed_classifications);
  if (ceiling) return no(ceiling, agent);

  if (!Number.isSafeInteger(options.now) || options.now < 0) return no('internal', agent);
  const projection: MatrixProjection = {
    agent: { name: agent.name, namespace: agent.namespace },
    allowed_classifications: want,
    audience: ctx.audience,
    delegation_id: ctx.delegation_id,
    exp: options.now + MATRIX_LIFETIME_SECONDS,
    groups: [],
    iat: options.now,
    kind: ctx.caller.kind,
    ...(ctx.caller.kind === 'bridged_matrix' ? { network: ctx.caller.network } : {}),
    principal: ctx.caller.principal,
    room: ctx.room,
    v: 1,
  };
  const encoded = encodeProjection(projection);
  if (!encoded.ok) return no(encoded.reason, agent);
  return {
    allow: true,
    headers: { [IDENTITY_HEADER]: encoded.value, 'x-user-id': ctx.caller.principal },
    agent,
    context: ctx,
    room,
  };
}
