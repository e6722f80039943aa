/**
 * The demo corpus seeded into the embedded database on first start. Every chunk carries a real ACL
 * in the origin metadata contract, chosen so that each scenario of the walkthrough returns a
 * different, explainable set.
 */
const ALICE = { kind: 'matrix', principal: '@alice:org-a.example' } as const;
const BOB = { kind: 'bridged_matrix', network: 'slack', principal: '@slack-bob:org-a.example' } as const;
const CAROL = { kind: 'matrix', principal: '@carol:org-b.example' } as const;

interface DemoChunk {
  id: string;
  title: string;
  content: string;
  classification: 'public' | 'approved_non_public' | 'restricted';
  principals: readonly object[];
  groups: readonly string[];
}

export const DEMO_CHUNKS: readonly DemoChunk[] = [
  {
    id: 'handbook/onboarding',
    title: 'Onboarding handbook',
    content: 'Onboarding: new colleagues get a Matrix account, join the general room and read the handbook.',
    classification: 'public',
    principals: [ALICE, BOB],
    groups: ['partner/org-b/docs'],
  },
  {
    id: 'handbook/travel',
    title: 'Travel policy',
    content: 'Travel policy: book trains for trips under six hours; expenses are filed within thirty days.',
    classification: 'public',
    principals: [ALICE, BOB],
    groups: [],
  },
  {
    id: 'engineering/roadmap',
    title: 'Engineering roadmap',
    content: 'Roadmap: the retrieval service moves to HNSW iterative scans for large authorized sets next quarter.',
    classification: 'approved_non_public',
    principals: [ALICE],
    groups: ['partner/org-d/engineering'],
  },
  {
    id: 'engineering/oncall',
    title: 'On-call notes',
    content: 'On-call notes: the knowledge database fails over within one minute; page the platform team.',
    classification: 'public',
    principals: [ALICE],
    groups: [],
  },
  {
    id: 'partners/org-b-integration',
    title: 'Org B integration guide',
    content: 'Integration guide for org B: call the public A2A route with a client-credentials token.',
    classification: 'public',
    principals: [],
    groups: ['partner/org-b/docs'],
  },
  {
    id: 'partners/org-d-architecture',
    title: 'Org D architecture notes',
    content: 'Architecture notes shared with org D under the bilateral agreement: gateway, projector, retrieval.',
    classification: 'approved_non_public',
    principals: [],
    groups: ['partner/org-d/engineering'],
  },
  {
    id: 'hr/salaries',
    title: 'Salary bands',
    content: 'Salary bands are restricted and never served by this retrieval profile.',
    classification: 'restricted',
    principals: [ALICE],
    groups: [],
  },
  {
    id: 'federation/org-b-room',
    title: 'Shared room notes',
    content: 'Notes from the federated room with org B: Carol from org B reviews the integration guide.',
    classification: 'public',
    principals: [ALICE, CAROL],
    groups: [],
  },
];

export function demoRecords() {
  return DEMO_CHUNKS.map((c) => ({
    content: c.content,
    metadata: {
      source: { id: `demo/${c.id}`, title: c.title, locator: `demo:${c.id}` },
      classification: c.classification,
      allowed_principals: c.principals,
      allowed_groups: c.groups,
    },
  }));
}
