/**
 * Differential property: for any sequence of adds, changes and deletes of our four kinds (and of the
 * JWKS read from its Secret), the incremental render equals the full render after every step, and
 * reuses what the dependency map says it may (fast-check).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { agent, examples, partner, room } from '../../testkit/controller/fixtures.ts';
import type { PartnerClient, Resources, RetrievalAgent, RetrievalPlatform, RetrievalRoom } from '../types.ts';
import { type RenderMemo, renderIncremental } from './incremental.ts';
import { render } from './index.ts';

const base = examples();
const PLATFORM = base.platforms[0] as RetrievalPlatform;
// Few names, so that operations keep hitting the same resources and partners bind to existing agents.
const AGENT_NS = ['kagent', 'kagent', 'team-b'];
const AGENT_NAMES = ['knowledge-agent', 'a1', 'a2'];
const ROOM_NAMES = ['r0', 'r1', 'r2', 'r3', 'r4'];
const ROOM_IDS = ['!a:org-a.example', '!b:org-a.example', '!c:org-a.example', 'not-a-room-id'];
const PARTNER_NAMES = ['p0', 'p1', 'p2'];

type State = {
  platforms: Map<string, RetrievalPlatform>;
  agents: Map<string, RetrievalAgent>;
  rooms: Map<string, RetrievalRoom>;
  partners: Map<string, PartnerClient>;
  jwksInline?: string;
};

type Op =
  | { t: 'agent'; ns: string; name: string; rpm: number; public: boolean; uid?: string; label?: string }
  | { t: 'agent-'; ns: string; name: string }
  | { t: 'room'; name: string; roomId: string; agreed: boolean }
  | { t: 'room-'; name: string }
  | {
      t: 'partner';
      name: string;
      azp: string;
      issuer: string;
      agents: { namespace: string; name: string }[];
      groups: readonly string[];
      agreed: boolean;
    }
  | { t: 'partner-'; name: string }
  | {
      t: 'platform';
      name: string;
      timeout: number;
      a2aBackend: 'controller' | 'agentService';
      publicListener: boolean;
      jwks: 'uri' | 'secret' | 'none';
      capability: 'plain' | 'ledger';
      localGroups: readonly string[];
      uid?: string;
    }
  | { t: 'platform-'; name: string }
  | { t: 'jwks'; value?: string }
  | { t: 'status'; kind: 'agent' | 'room'; name: string; rv: string };

const agentRef = fc.record({
  namespace: fc.constantFrom(...AGENT_NS),
  name: fc.constantFrom(...AGENT_NAMES),
});
const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record(
      {
        t: fc.constant('agent' as const),
        ns: fc.constantFrom(...AGENT_NS),
        name: fc.constantFrom(...AGENT_NAMES),
        rpm: fc.constantFrom(0, 30, 60, 999),
        public: fc.constantFrom(true, true, false),
        uid: fc.constantFrom('u1', 'u2'),
        label: fc.constantFrom('x', 'y'),
      },
      { requiredKeys: ['t', 'ns', 'name', 'rpm', 'public'] },
    ),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant('agent-' as const),
      ns: fc.constantFrom(...AGENT_NS),
      name: fc.constantFrom(...AGENT_NAMES),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant('room' as const),
      name: fc.constantFrom(...ROOM_NAMES),
      roomId: fc.constantFrom(...ROOM_IDS),
      agreed: fc.boolean(),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ t: fc.constant('room-' as const), name: fc.constantFrom(...ROOM_NAMES) }),
  },
  {
    weight: 6,
    arbitrary: fc.record({
      t: fc.constant('partner' as const),
      name: fc.constantFrom(...PARTNER_NAMES),
      // Mostly one azp per partner; `shared` makes two partners claim the same key (a conflict).
      azp: fc.constantFrom('a', 'b', 'a', 'b', 'shared'),
      issuer: fc.constantFrom('https://issuer.example', 'https://issuer.example', 'https://other.example'),
      agents: fc.uniqueArray(agentRef, {
        minLength: 1,
        maxLength: 2,
        selector: (r) => `${r.namespace}/${r.name}`,
      }),
      groups: fc.constantFrom(['partner/org-x/docs'], ['partner/org-x/docs', 'partner/org-x/b'], ['local/team']),
      agreed: fc.boolean(),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ t: fc.constant('partner-' as const), name: fc.constantFrom(...PARTNER_NAMES) }),
  },
  {
    weight: 2,
    arbitrary: fc.record(
      {
        t: fc.constant('platform' as const),
        name: fc.constantFrom('default', 'default', 'other'),
        timeout: fc.constantFrom(30, 45),
        a2aBackend: fc.constantFrom('controller' as const, 'agentService' as const),
        publicListener: fc.boolean(),
        jwks: fc.constantFrom('uri' as const, 'secret' as const, 'none' as const),
        capability: fc.constantFrom('plain' as const, 'ledger' as const),
        localGroups: fc.constantFrom([], ['local/team']),
        uid: fc.constantFrom('pu1', 'pu2'),
      },
      {
        requiredKeys: ['t', 'name', 'timeout', 'a2aBackend', 'publicListener', 'jwks', 'capability', 'localGroups'],
      },
    ),
  },
  {
    weight: 1,
    arbitrary: fc.record({ t: fc.constant('platform-' as const), name: fc.constantFrom('default', 'other') }),
  },
  {
    weight: 1,
    arbitrary: fc.record(
      { t: fc.constant('jwks' as const), value: fc.constantFrom('{"keys":[]}', '{"keys":[{"kty":"RSA"}]}') },
      { requiredKeys: ['t'] },
    ),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant('status' as const),
      kind: fc.constantFrom('agent' as const, 'room' as const),
      name: fc.constantFrom(...AGENT_NAMES, ...ROOM_NAMES),
      rv: fc.constantFrom('7', '8', '9'),
    }),
  },
);

function initial(): State {
  return {
    platforms: new Map(base.platforms.map((p) => [p.metadata.name, p])),
    agents: new Map(base.agents.map((a) => [`${a.metadata.namespace}/${a.metadata.name}`, a])),
    rooms: new Map(base.rooms.map((r) => [r.metadata.name, r])),
    partners: new Map(base.partners.map((p) => [p.metadata.name, p])),
  };
}

/** Applies one operation as the API server would: a changed resource is a new object. */
function apply(s: State, o: Op): void {
  switch (o.t) {
    case 'agent': {
      const a = agent(o.ns, o.name, { public: o.public, rateLimit: { requestsPerMinute: o.rpm } });
      a.metadata = {
        ...a.metadata,
        ...(o.uid ? { uid: `${o.uid}-${o.ns}-${o.name}` } : {}),
        ...(o.label ? { labels: { team: o.label } } : {}),
      };
      s.agents.set(`${o.ns}/${o.name}`, a);
      return;
    }
    case 'agent-':
      s.agents.delete(`${o.ns}/${o.name}`);
      return;
    case 'room':
      s.rooms.set(
        o.name,
        room(
          o.name,
          o.roomId,
          o.agreed ? { allowedClassifications: ['approved_non_public', 'public'], agreementRef: 'agr-1' } : {},
        ),
      );
      return;
    case 'room-':
      s.rooms.delete(o.name);
      return;
    case 'partner':
      s.partners.set(
        o.name,
        partner(o.name, {
          azp: o.azp === 'shared' ? 'shared-azp' : `${o.name}-${o.azp}`,
          issuer: o.issuer,
          agents: o.agents,
          groups: [...o.groups],
          ...(o.agreed ? { allowedClassifications: ['approved_non_public', 'public'], agreementRef: 'agr-2' } : {}),
        }),
      );
      return;
    case 'partner-':
      s.partners.delete(o.name);
      return;
    case 'platform': {
      const spec = structuredClone(PLATFORM.spec);
      spec.publicRetrievalTimeoutSeconds = o.timeout;
      spec.a2aBackend = o.a2aBackend;
      spec.capability = o.capability;
      spec.localGroups = [...o.localGroups];
      if (!o.publicListener) delete spec.gateway.publicListener;
      if (o.jwks === 'none') delete spec.jwt;
      else if (o.jwks === 'secret' && spec.jwt) {
        const { jwksUri: _u, ...jwt } = spec.jwt;
        spec.jwt = { ...jwt, jwksSecretRef: { name: 'jwks', key: 'jwks.json' } };
      }
      s.platforms.set(o.name, {
        ...PLATFORM,
        metadata: { name: o.name, ...(o.uid ? { uid: o.uid } : {}) },
        spec,
      });
      return;
    }
    case 'platform-':
      s.platforms.delete(o.name);
      return;
    case 'jwks':
      if (o.value === undefined) delete s.jwksInline;
      else s.jwksInline = o.value;
      return;
    case 'status': {
      // A status write: new resourceVersion and status, same spec (the render must not care).
      const map = o.kind === 'agent' ? s.agents : s.rooms;
      const key = o.kind === 'agent' ? `kagent/${o.name}` : o.name;
      const r = map.get(key) as RetrievalAgent | RetrievalRoom | undefined;
      if (!r) return;
      map.set(key, {
        ...r,
        metadata: { ...r.metadata, resourceVersion: o.rv },
        status: { conditions: [] },
      } as never);
      return;
    }
  }
}

function resources(s: State): Resources {
  return {
    platforms: [...s.platforms.values()],
    agents: [...s.agents.values()],
    rooms: [...s.rooms.values()],
    partners: [...s.partners.values()],
    ...(s.jwksInline !== undefined ? { jwksInline: s.jwksInline } : {}),
  };
}

describe('incremental render', () => {
  it('equals the full render after every step of any sequence of adds, changes and deletes', () => {
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 20 }), (ops) => {
        const s = initial();
        let memo: RenderMemo | undefined;
        for (const o of ops) {
          apply(s, o);
          const input = resources(s);
          const inc = renderIncremental(input, memo);
          memo = inc.memo;
          const full = render(input);
          assert.deepStrictEqual(inc.objects, full.objects, `objects after ${JSON.stringify(o)}`);
          assert.deepStrictEqual(inc.conflicts, full.conflicts, `conflicts after ${JSON.stringify(o)}`);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('one room change renders no agent again and hands back every unchanged object itself', () => {
    const s = initial();
    for (const n of ['a1', 'a2', 'a3']) apply(s, { t: 'agent', ns: 'kagent', name: n, rpm: 60, public: true });
    const first = renderIncremental(resources(s));
    assert.equal(first.agentsRendered, 4);
    apply(s, { t: 'room', name: 'r9', roomId: '!z:org-a.example', agreed: true });
    const second = renderIncremental(resources(s), first.memo);
    assert.equal(second.agentsRendered, 0);
    assert.equal(second.agentsReused, 4);
    const before = new Set(first.objects);
    const changed = second.objects.filter((o) => !before.has(o));
    // Only the projector configuration carries rooms (inline registry at this size).
    assert.deepEqual(
      changed.map((o) => `${o.kind}/${o.metadata.name}`),
      ['ConfigMap/fgentic-projector-config'],
    );
  });

  it('one agent change renders that agent only; a partner change renders the agents it is bound to', () => {
    const s = initial();
    for (const n of ['a1', 'a2', 'a3']) apply(s, { t: 'agent', ns: 'kagent', name: n, rpm: 60, public: true });
    const first = renderIncremental(resources(s));
    apply(s, { t: 'agent', ns: 'kagent', name: 'a2', rpm: 999, public: true });
    const second = renderIncremental(resources(s), first.memo);
    assert.equal(second.agentsRendered, 1);
    const before = new Set(first.objects);
    assert.deepEqual(
      second.objects.filter((o) => !before.has(o)).map((o) => `${o.kind}/${o.metadata.name}`),
      ['AgentgatewayPolicy/fgentic-mcp.kagent.a2'],
    );
    apply(s, {
      t: 'partner',
      name: 'p1',
      azp: 'b',
      issuer: 'https://issuer.example',
      agents: [{ namespace: 'kagent', name: 'a3' }],
      groups: ['partner/org-x/docs'],
      agreed: false,
    });
    const third = renderIncremental(resources(s), second.memo);
    assert.equal(third.agentsRendered, 1);
    // Same partner, same binding, another azp: the bound agent's public route must follow.
    const again = (azp: string) =>
      apply(s, {
        t: 'partner',
        name: 'p1',
        azp,
        issuer: 'https://issuer.example',
        agents: [{ namespace: 'kagent', name: 'a3' }],
        groups: ['partner/org-x/docs'],
        agreed: false,
      });
    again('c');
    const fourth = renderIncremental(resources(s), third.memo);
    assert.equal(fourth.agentsRendered, 1);
    assert.deepStrictEqual(fourth.objects, render(resources(s)).objects);
  });
});
