/**
 * Test double of the Matrix client-server API (spec v1.x, `/_matrix/client/v3`), test-only.
 *
 * Serves the two reads the live check makes, with real-shaped events:
 * - `GET /rooms/{roomId}/state` → array of current state events (ClientEvent without `unsigned`
 *   noise: type, state_key, content, event_id, sender, origin_server_ts, room_id).
 * - `GET /rooms/{roomId}/joined_members` → `{"joined": {"@user:hs": {"display_name", "avatar_url"}}}`.
 * Requires `Authorization: Bearer <token>` (401 M_MISSING_TOKEN / M_UNKNOWN_TOKEN), answers unknown
 * rooms with 403 M_FORBIDDEN, and can be switched to fail (500 M_UNKNOWN) or hang (outage), or answer
 * every request after `delayMs` (an overloaded homeserver; the mode is read when the delay ends).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface DoubleEvent {
  type: string;
  state_key: string;
  content: Record<string, unknown>;
  event_id: string;
  sender: string;
}

export type DoubleMode = 'ok' | 'error' | 'hang';

export class HomeserverDouble {
  readonly rooms = new Map<string, Map<string, DoubleEvent>>();
  mode: DoubleMode = 'ok';
  delayMs = 0;
  requests = 0;
  private server?: Server;
  private counter = 0;
  url = '';

  constructor(readonly token: string) {}

  setState(roomId: string, ev: Omit<DoubleEvent, 'event_id'> & { event_id?: string }): DoubleEvent {
    let room = this.rooms.get(roomId);
    if (!room) {
      room = new Map();
      this.rooms.set(roomId, room);
    }
    const full: DoubleEvent = { ...ev, event_id: ev.event_id ?? `$ev${++this.counter}` };
    room.set(JSON.stringify([ev.type, ev.state_key]), full);
    return full;
  }

  /** The room of the ADR example: create, invite-only, joined history, ACL, three joined members. */
  seedAdrRoom(roomId: string, members: { principal: string; event_id: string }[], creator: string) {
    this.setState(roomId, {
      type: 'm.room.create',
      state_key: '',
      content: { room_version: '11', creator },
      event_id: '$create',
      sender: creator,
    });
    this.setState(roomId, {
      type: 'm.room.join_rules',
      state_key: '',
      content: { join_rule: 'invite' },
      event_id: '$join',
      sender: creator,
    });
    this.setState(roomId, {
      type: 'm.room.history_visibility',
      state_key: '',
      content: { history_visibility: 'joined' },
      event_id: '$history',
      sender: creator,
    });
    this.setState(roomId, {
      type: 'm.room.server_acl',
      state_key: '',
      content: { allow: ['org-a.example'], allow_ip_literals: false, deny: [] },
      event_id: '$acl',
      sender: creator,
    });
    this.setState(roomId, {
      type: 'm.room.power_levels',
      state_key: '',
      content: { users: { [creator]: 100 } },
      sender: creator,
    });
    for (const m of members) this.join(roomId, m.principal, m.event_id);
    // A member who left: present in state, not joined.
    this.setState(roomId, {
      type: 'm.room.member',
      state_key: '@carol:org-a.example',
      content: { membership: 'leave' },
      sender: '@carol:org-a.example',
    });
  }

  join(roomId: string, principal: string, eventId?: string) {
    return this.setState(roomId, {
      type: 'm.room.member',
      state_key: principal,
      content: { membership: 'join', displayname: principal.slice(1, principal.indexOf(':')) },
      sender: principal,
      ...(eventId ? { event_id: eventId } : {}),
    });
  }

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      this.requests += 1;
      if (this.delayMs > 0) setTimeout(() => this.answer(req, res), this.delayMs);
      else this.answer(req, res);
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.url;
  }

  private answer(req: IncomingMessage, res: ServerResponse) {
    const send = (status: number, body: unknown) => {
      const text = JSON.stringify(body);
      res
        .writeHead(status, {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(text),
        })
        .end(text);
    };
    if (this.mode === 'hang') return; // never answers
    if (this.mode === 'error') return send(500, { errcode: 'M_UNKNOWN', error: 'Internal server error' });
    const auth = req.headers.authorization;
    if (!auth) return send(401, { errcode: 'M_MISSING_TOKEN', error: 'Missing access token' });
    if (auth !== `Bearer ${this.token}`) return send(401, { errcode: 'M_UNKNOWN_TOKEN', error: 'Unknown token' });
    const m = /^\/_matrix\/client\/v3\/rooms\/([^/]+)\/(state|joined_members)$/.exec((req.url ?? '').split('?')[0]!);
    if (req.method !== 'GET' || !m) return send(404, { errcode: 'M_UNRECOGNIZED', error: 'Unrecognized request' });
    const roomId = decodeURIComponent(m[1]!);
    const room = this.rooms.get(roomId);
    if (!room) return send(403, { errcode: 'M_FORBIDDEN', error: 'User not in room' });
    const events = [...room.values()].map((e, k) => ({
      ...e,
      room_id: roomId,
      origin_server_ts: 1784116000000 + k,
    }));
    if (m[2] === 'state') return send(200, events);
    const joined: Record<string, { display_name: string; avatar_url: string | null }> = {};
    for (const e of events) {
      if (e.type === 'm.room.member' && e.content['membership'] === 'join')
        joined[e.state_key] = { display_name: String(e.content['displayname'] ?? ''), avatar_url: null };
    }
    return send(200, { joined });
  }

  async stop() {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }
}
