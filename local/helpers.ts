/** Shared builders for the end-to-end scenarios. */
import { randomUUID } from 'node:crypto';
import { type MatrixPrincipal, type RoomSnapshot, validateSnapshot } from '../contract/index.ts';

export const ALICE: MatrixPrincipal = { kind: 'matrix', principal: '@alice:org-a.example' };
export const BOB: MatrixPrincipal = {
  kind: 'bridged_matrix',
  network: 'slack',
  principal: '@slack-bob:org-a.example',
};
export const CAROL: MatrixPrincipal = { kind: 'matrix', principal: '@carol:org-b.example' };
export const GENERAL_ROOM = '!room:org-a.example';
export const ENGINEERING_ROOM = '!Wv5rJrUq0T3bCu1mXxkP8n2Q6sZyLhDgAeFcI9oNj4E';

type Member = MatrixPrincipal | { kind: 'bridge_service'; principal: string };

/** A room-state snapshot as the bridge reads it: the agent ghost plus the given readers. */
export function roomSnapshot(
  roomId: string,
  readers: readonly Member[],
  classes: readonly string[] = ['public'],
  opts: { historyVisibility?: string } = {},
): RoomSnapshot {
  const members: Member[] = [{ kind: 'bridge_service', principal: '@agent-docs:org-a.example' }, ...readers];
  const joined = members
    .map((m, k) => ({ event_id: `$member-${k}`, ...m }))
    .sort((a, b) => {
      const ka = `${a.kind}\u0000${'network' in a ? a.network : ''}\u0000${a.principal}`;
      const kb = `${b.kind}\u0000${'network' in b ? b.network : ''}\u0000${b.principal}`;
      return Buffer.compare(Buffer.from(ka), Buffer.from(kb));
    });
  const foreign = readers.some((m) => m.kind === 'matrix' && !m.principal.endsWith(':org-a.example'));
  const s = validateSnapshot({
    allowed_classifications: classes,
    create: { event_id: '$create', federate: true },
    history_visibility: { event_id: '$history', value: opts.historyVisibility ?? 'joined' },
    join_rule: { event_id: '$join', value: 'invite' },
    joined,
    room_id: roomId,
    server_acl: foreign
      ? { allow: ['org-a.example', 'org-b.example'], allow_ip_literals: false, deny: [], event_id: '$acl' }
      : null,
  });
  if (!s.ok) throw new Error(`snapshot: ${s.reason} at ${s.path}`);
  return s.value;
}

/** A raw A2A 1.0 JSON-RPC request, for bodies the SDK would never produce. */
export async function rawA2A(
  url: string,
  headers: Record<string, string>,
  method: string,
  params: unknown,
): Promise<{ status: number; body: string }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return { status: res.status, body: await res.text() };
}

export function sendParams(text: string, extra: Record<string, unknown> = {}, configuration?: unknown) {
  return {
    message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra },
    ...(configuration !== undefined ? { configuration } : {}),
  };
}

/** Source ids of the chunks an agent answer was grounded in. */
export function groundedSources(task: unknown): string[] {
  const parts: any[] = (task as any)?.status?.message?.parts ?? [];
  const data = parts.find((p) => p.content?.$case === 'data')?.content.value;
  const results: { source: { id: string } }[] = data?.result?.results ?? [];
  return results.map((r) => r.source.id.replace(/^demo\//, '')).sort();
}

export function answerText(task: unknown): string {
  const parts: any[] = (task as any)?.status?.message?.parts ?? [];
  return parts.find((p) => p.content?.$case === 'text')?.content.value ?? '';
}
