/**
 * One truth from custom resource to running process, as a property of the whole platform: for every
 * set of our custom resources, admission (the CRDs' schema and CEL, then the webhook, as
 * `admission check` runs them) allows the set if and only if the render writes a `projector.json`
 * and a `retrieval.json` that both servers' loaders read and that serve every admitted agent, room
 * and partner. Where admission denies one targeted change, a denial names the changed field (or the
 * cross-object rule it breaks).
 *
 * The sets are mostly valid (the examples, plus generated agents, rooms and partners) with up to two
 * targeted mutations from a catalogue of the fields that reach a rendered file or object; the
 * catalogue includes the cases that once passed admission and then made a server deny everything.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { render } from '../controller/render/index.ts';
import type { K8sObject, Resources } from '../controller/types.ts';
import { assembleConfig, REGISTRY_SHARD_KEY } from '../projector/registry.ts';
import { agentKey, parseConfigText } from '../retrieval/config.ts';
import {
  labelish,
  labelMapish,
  modelish,
  portish,
  profileish,
  serviceUrlish,
  textNear,
  urlish,
} from '../testkit/common/field-arbitraries.ts';
import { agent, examples, partner, room } from '../testkit/controller/fixtures.ts';
import { checkManifests } from '../webhook/offline.ts';

type Spec = Record<string, any>;

/** One targeted change: the field it touches (as a denial names it) and how. */
interface Mutation {
  readonly field: string;
  readonly apply: (r: Resources) => void;
  readonly toString?: () => string;
}

const on =
  (field: string, target: (r: Resources) => Spec, set: (o: Spec, v: any) => void) => (arb: fc.Arbitrary<unknown>) =>
    arb.map(
      (v): Mutation => ({
        field,
        apply: (r) => set(target(r), v),
        // What a counterexample prints.
        toString: () => `${field} = ${JSON.stringify(v)}`,
      }),
    );

const platformSpec = (r: Resources): Spec => (r.platforms[0] as unknown as { spec: Spec }).spec;
const firstAgent = (r: Resources): Spec => r.agents[0] as unknown as Spec;
const firstRoom = (r: Resources): Spec => (r.rooms[0] as unknown as { spec: Spec }).spec;

const MUTATIONS: fc.Arbitrary<Mutation>[] = [
  on('spec.embeddings.profile', platformSpec, (s, v) => (s['embeddings'].profile = v))(profileish),
  on('spec.embeddings.url', platformSpec, (s, v) => (s['embeddings'].url = v))(urlish),
  on('spec.embeddings.model', platformSpec, (s, v) => (s['embeddings'].model = v))(modelish),
  on('spec.liveRoomCheck.homeserverUrl', platformSpec, (s, v) => {
    s['liveRoomCheck'] = {
      enabled: true,
      homeserverUrl: v,
      tokenSecretRef: { name: 'hs-token', key: 'token' },
    };
  })(urlish),
  on('spec.gateway.mcpUrl', platformSpec, (s, v) => (s['gateway'].mcpUrl = v))(urlish),
  on(
    'spec.jwt.jwksUri',
    platformSpec,
    (s, v) => (s['jwt'] = { issuer: 'https://issuer.example', jwksUri: v }),
  )(serviceUrlish),
  on('spec.gateway.proxyPodLabels', platformSpec, (s, v) => (s['gateway'].proxyPodLabels = v))(labelMapish),
  on('spec.database.port', platformSpec, (s, v) => (s['database'].port = v))(portish),
  on('spec.projector.port', platformSpec, (s, v) => (s['projector'].port = v))(portish),
  on('spec.namespaces.retrieval', platformSpec, (s, v) => (s['namespaces'].retrieval = v))(labelish),
  on('spec.bridge.workload', platformSpec, (s, v) => (s['bridge'].workload = v))(labelish),
  on('spec.gateway.localListener', platformSpec, (s, v) => (s['gateway'].localListener = v))(labelish),
  on('metadata.name', firstAgent, (a, v) => (a['metadata'] = { ...a['metadata'], name: v }))(labelish),
  on(
    'spec.rateLimit.requestsPerMinute',
    firstAgent,
    (a, v) => (a['spec'].rateLimit = { requestsPerMinute: v }),
  )(fc.oneof(portish, fc.constantFrom(10_000, 10_001))),
  on('spec.description', firstAgent, (a, v) => (a['spec'].description = v))(textNear(1024)),
  on('spec.agreementRef', firstRoom, (s, v) => {
    s['allowedClassifications'] = ['approved_non_public', 'public'];
    s['agreementRef'] = v;
  })(textNear(253)),
  // Across resources.
  fc.constant<Mutation>({
    field: 'room-duplicate',
    apply: (r) => r.rooms.push(room('again', (r.rooms[0] as { spec: { roomId: string } }).spec.roomId)),
  }),
  fc.constant<Mutation>({
    field: 'partner-duplicate',
    apply: (r) =>
      r.partners.push(partner('again', { ...structuredClone((r.partners[0] as { spec: Spec }).spec) } as never)),
  }),
  fc.constant<Mutation>({
    field: 'group-collision',
    apply: (r) => (platformSpec(r)['localGroups'] = [(r.partners[0] as { spec: { groups: string[] } }).spec.groups[0]]),
  }),
];

/** Valid additions, so sets vary beyond the examples. */
const extras = fc.record({
  agents: fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9-]{0,8}[a-z0-9]$/), { maxLength: 2 }),
  rooms: fc.uniqueArray(fc.stringMatching(/^[a-z0-9]{1,8}$/), { maxLength: 3 }),
  partners: fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9]{0,6}$/), { maxLength: 2 }),
});

function buildSet(add: { agents: string[]; rooms: string[]; partners: string[] }, mutations: Mutation[]): Resources {
  const r = examples();
  for (const name of add.agents) r.agents.push(agent('team-a', name));
  for (const id of add.rooms) r.rooms.push(room(`gen-${id}`, `!gen${id}:org-a.example`));
  for (const name of add.partners) r.partners.push(partner(`gen-${name}`, { azp: `gen-${name}-azp` }));
  for (const m of mutations) m.apply(r);
  return r;
}

function objectsOf(r: Resources): K8sObject[] {
  return [...r.platforms, ...r.agents, ...r.rooms, ...r.partners] as unknown as K8sObject[];
}

/** Admission of the whole set: every object allowed by the CRD and the webhook (`admission check`). */
function admission(r: Resources): { allowed: boolean; messages: string[] } {
  const results = checkManifests(
    objectsOf(r).map((o, index) => ({ source: 'set', index, object: structuredClone(o) as never })),
    'operator',
  );
  const denied = results.filter((x) => x.verdict !== 'allowed');
  return { allowed: denied.length === 0, messages: denied.map((x) => `${x.kind} ${x.name}: ${x.message}`) };
}

const configText = (objects: K8sObject[], name: string, key: string) =>
  (
    objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === name) as
      | { data?: Record<string, string> }
      | undefined
  )?.data?.[key];

/** The render writes both files, both servers read them, and they serve every resource of the set. */
function served(r: Resources): { ok: boolean; why: string } {
  const { objects, conflicts } = render(structuredClone(r));
  if (conflicts.length > 0) return { ok: false, why: conflicts.map((c) => `${c.reason}: ${c.message}`).join('; ') };
  const base = configText(objects, 'fgentic-projector-config', 'projector.json');
  const retrievalText = configText(objects, 'fgentic-retrieval-config', 'retrieval.json');
  if (base === undefined || retrievalText === undefined) return { ok: false, why: 'a configuration is missing' };
  const shards = new Map<string, string>();
  for (const o of objects) {
    const text = (o as { data?: Record<string, string> }).data?.[REGISTRY_SHARD_KEY];
    if (o.kind === 'ConfigMap' && text !== undefined) shards.set(o.metadata.name, text);
  }
  const projector = assembleConfig(base, shards);
  if (!projector.ok) return { ok: false, why: `projector refuses: ${projector.error}` };
  const retrieval = parseConfigText(retrievalText);
  if (!retrieval.ok) return { ok: false, why: `retrieval refuses: ${retrieval.problem}` };
  const p = projector.config;
  for (const a of r.agents) {
    const key = `${a.metadata.namespace}/${a.metadata.name}`;
    if (!p.agents.some((x) => `${x.namespace}/${x.name}` === key)) return { ok: false, why: `projector lacks ${key}` };
    if (!retrieval.config.agents.some((x) => agentKey(x) === key)) return { ok: false, why: `retrieval lacks ${key}` };
  }
  for (const x of r.rooms) if (!p.rooms.has(x.spec.roomId)) return { ok: false, why: `no room ${x.metadata.name}` };
  if (p.partners.length !== r.partners.length) return { ok: false, why: 'a partner is missing' };
  return { ok: true, why: '' };
}

/** Does a denial name the field (`spec.a.b` or `/spec/a/b`) or the cross-object rule? */
function names(messages: string[], field: string): boolean {
  const pointer = `/${field.replaceAll('.', '/')}`;
  return messages.some((m) => m.includes(field) || m.includes(pointer) || m.includes(`[${field}]`));
}

describe('admission allows a set of resources ⇔ the render writes configurations both servers load and serve', () => {
  it('the examples: allowed and served', () => {
    const r = examples();
    assert.deepEqual(admission(r).messages, []);
    assert.deepEqual(served(r), { ok: true, why: '' });
  });

  it('cases found from outside: both layers now refuse them (the servers once refused them alone)', () => {
    const cases: [string, (s: Spec) => void][] = [
      ['spec.embeddings.profile', (s) => (s['embeddings'].profile = 'bge_m3')],
      [
        'spec.liveRoomCheck.homeserverUrl',
        (s) =>
          (s['liveRoomCheck'] = {
            enabled: true,
            homeserverUrl: 'http://synapse.matrix.svc.cluster.local:99999',
            tokenSecretRef: { name: 'hs-token', key: 'token' },
          }),
      ],
      ['spec.embeddings.model', (s) => (s['embeddings'].model = 'm'.repeat(256))],
    ];
    for (const [field, patch] of cases) {
      const r = examples();
      patch(platformSpec(r));
      const a = admission(r);
      assert.equal(a.allowed, false, field);
      assert.ok(names(a.messages, field), `${field}: ${a.messages.join(' | ')}`);
      assert.equal(served(r).ok, false, field);
    }
  });

  it('property: for mostly-valid sets with targeted mutations', () => {
    const seen = { allowed: 0, denied: 0 };
    fc.assert(
      fc.property(extras, fc.array(fc.oneof(...MUTATIONS), { maxLength: 2 }), (add, mutations) => {
        const r = buildSet(add, mutations);
        const a = admission(r);
        const s = served(r);
        seen[a.allowed ? 'allowed' : 'denied']++;
        const what = `${mutations.map((m) => m.field).join(', ')}\nadmission: ${a.messages.join(' | ')}\nserved: ${s.why}`;
        assert.equal(a.allowed, s.ok, what);
        if (!a.allowed && mutations.length === 1) assert.ok(names(a.messages, (mutations[0] as Mutation).field), what);
      }),
      { numRuns: 300 },
    );
    assert.ok(seen.allowed >= 30 && seen.denied >= 30, `one-sided input: ${JSON.stringify(seen)}`);
  });
});
