/** Builders for contract tests: the ADR's examples, with one field changed where a test needs it. */
import { encodeBase64url } from '../../contract/base64url.ts';
import { jcs } from '../../contract/jcs.ts';

export const AGENT = { name: 'knowledge-agent', namespace: 'kagent' } as const;
export const IAT = 1784116800;
export const EXP = 1784117400;
export const NOW = IAT + 60;

export function matrixExample(): Record<string, unknown> {
  return {
    agent: { name: 'knowledge-agent', namespace: 'kagent' },
    allowed_classifications: ['approved_non_public', 'public'],
    audience: [
      { kind: 'bridged_matrix', network: 'slack', principal: '@slack-bob:org-a.example' },
      { kind: 'matrix', principal: '@alice:org-a.example' },
    ],
    delegation_id: '9f4e9e8b6a8d33bdb85d8fd5bc13ed101cb42a1c9d9b49ccf42c0a49387eddb6',
    exp: EXP,
    groups: [],
    iat: IAT,
    kind: 'matrix',
    principal: '@alice:org-a.example',
    room: {
      event_id: '$event',
      history_visibility: 'joined',
      id: '!room:org-a.example',
      join_rule: 'invite',
      state_sha256: '58e67efe5cd7f5ff2805eb0f35192ea90ef64244c896417b5504af8ad102be17',
    },
    v: 1,
  };
}

export function oauthExample(): Record<string, unknown> {
  return {
    agent: { name: 'knowledge-agent', namespace: 'kagent' },
    allowed_classifications: ['approved_non_public', 'public'],
    client: {
      audience: 'fgentic-a2a',
      azp: 'org-b-a2a',
      issuer: 'https://issuer.example',
      policy_id: 'org-b',
    },
    delegation_id: '33e24ba4e2eef670a7983e8a9bc77d110111b54e21179079807df031c2b877b1',
    exp: EXP,
    groups: ['partner/org-b/docs'],
    iat: IAT,
    kind: 'oidc_client',
    v: 1,
  };
}

export function snapshotExample(): Record<string, unknown> {
  return {
    allowed_classifications: ['approved_non_public', 'public'],
    create: { event_id: '$create', federate: true },
    history_visibility: { event_id: '$history', value: 'joined' },
    join_rule: { event_id: '$join', value: 'invite' },
    joined: [
      { event_id: '$member-agent', kind: 'bridge_service', principal: '@agent-docs:org-a.example' },
      {
        event_id: '$member-slack-bob',
        kind: 'bridged_matrix',
        network: 'slack',
        principal: '@slack-bob:org-a.example',
      },
      { event_id: '$member-alice', kind: 'matrix', principal: '@alice:org-a.example' },
    ],
    room_id: '!room:org-a.example',
    server_acl: {
      allow: ['org-a.example', 'org-b.example'],
      allow_ip_literals: false,
      deny: [],
      event_id: '$acl',
    },
  };
}

export function roomContextExample(): Record<string, unknown> {
  const p = matrixExample();
  return {
    allowed_classifications: p['allowed_classifications'],
    audience: p['audience'],
    caller: { kind: 'matrix', principal: '@alice:org-a.example' },
    delegation_id: p['delegation_id'],
    room: p['room'],
    v: 1,
  };
}

/** Canonical header value for any JSON object. */
export function encode(value: unknown): string {
  return encodeBase64url(new TextEncoder().encode(jcs(value)));
}

/** Header value for raw JSON text (which may be deliberately non-canonical). */
export function encodeText(text: string): string {
  return encodeBase64url(new TextEncoder().encode(text));
}

/** Deep copy with one path replaced (or removed when value is undefined). */
export function withField(obj: Record<string, unknown>, path: string, value: unknown): Record<string, unknown> {
  const copy = structuredClone(obj);
  const keys = path.split('.');
  let cur: Record<string, unknown> = copy;
  for (const k of keys.slice(0, -1)) cur = cur[k] as Record<string, unknown>;
  const last = keys[keys.length - 1]!;
  if (value === undefined) delete cur[last];
  else cur[last] = value;
  return copy;
}
