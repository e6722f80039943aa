/** Conflicts render nothing for the conflicting resources, report them, and leave the rest intact. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { agent, examples, partner, room } from '../../testkit/controller/fixtures.ts';
import type { K8sObject, Resources } from '../types.ts';
import { render } from './index.ts';

function projector(objects: K8sObject[]): any {
  const cm = objects.find((o) => o.metadata.name === 'fgentic-projector-config') as unknown as {
    data: Record<string, string>;
  };
  return JSON.parse(cm.data['projector.json'] as string);
}
const names = (objects: K8sObject[]) =>
  objects.map((o) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`);

describe('conflicts', () => {
  it('two partner entries with one (issuer, audience, azp) key: both dropped, both reported', () => {
    const input = examples();
    input.partners.push(partner('org-b-copy', { azp: 'org-b-a2a', policyId: 'org-x' }));
    const { objects, conflicts } = render(input);
    assert.deepEqual(
      conflicts.map((c) => [c.kind, c.name, c.reason]),
      [
        ['PartnerClient', 'org-b-a2a', 'DuplicateClient'],
        ['PartnerClient', 'org-b-copy', 'DuplicateClient'],
      ],
    );
    const cfg = projector(objects);
    assert.deepEqual(
      cfg.partners.map((p: any) => p.azp),
      ['org-d-a2a'],
    );
    const pol = objects.find(
      (o) => o.kind === 'AgentgatewayPolicy' && o.metadata.name.startsWith('fgentic-a2a-public'),
    ) as any;
    assert.ok(JSON.stringify(pol.spec.traffic.authorization).includes('org-d-a2a'));
    assert.ok(!JSON.stringify(pol.spec.traffic.authorization).includes('org-b-a2a'));
  });

  it('a partner group colliding with a local group: nothing renders, the platform is reported', () => {
    const input = examples();
    (input.platforms[0] as any).spec.localGroups = ['partner/org-b/docs'];
    // The CRD rejects this; an offline render must still never admit it.
    const { objects, conflicts } = render(input);
    assert.deepEqual(objects, []);
    assert.deepEqual(
      conflicts.filter((c) => c.kind === 'RetrievalPlatform').map((c) => c.reason),
      ['Invalid'],
    );
    assert.equal(conflicts.filter((c) => c.reason === 'NoPlatform').length, 5);
  });

  it('local groups outside partner/ do not collide', () => {
    const input = examples();
    (input.platforms[0] as any).spec.localGroups = ['engineering'];
    input.partners.push(partner('org-x', { groups: ['partner/org-x/docs'] }));
    const r = render(input);
    assert.deepEqual(r.conflicts, []);
  });

  it('one room twice: both records dropped, both reported', () => {
    const input = examples();
    input.rooms.push(
      room('dup', '!room:org-a.example', {
        allowedClassifications: ['approved_non_public', 'public'],
        agreementRef: 'x',
      }),
    );
    const { objects, conflicts } = render(input);
    assert.deepEqual(
      conflicts.map((c) => [c.name, c.reason]),
      [
        ['dup', 'DuplicateRoom'],
        ['org-a-general', 'DuplicateRoom'],
      ],
    );
    assert.deepEqual(
      projector(objects).rooms.map((r: any) => r.roomId),
      ['!Wv5rJrUq0T3bCu1mXxkP8n2Q6sZyLhDgAeFcI9oNj4E'],
    );
  });

  it('two RetrievalAgents for one kagent Agent: no Agent, no routes, reported', () => {
    const input = examples();
    input.agents.push(agent('kagent', 'knowledge-agent', { modelConfig: 'other' }));
    const { objects, conflicts } = render(input);
    assert.deepEqual(
      conflicts.map((c) => [c.kind, c.reason]),
      [
        ['RetrievalAgent', 'DuplicateAgent'],
        ['RetrievalAgent', 'DuplicateAgent'],
      ],
    );
    assert.ok(!names(objects).some((n) => n.includes('knowledge-agent')));
    assert.deepEqual(projector(objects).agents, []);
    assert.deepEqual(projector(objects).partners[0].agents, []);
  });

  it('invalid resources (offline input the apiserver never checked) are dropped and reported', () => {
    const input = examples();
    input.rooms.push(room('bad', 'not-a-room'));
    input.rooms.push(room('bad2', '!x:org-a.example', { allowedClassifications: ['approved_non_public', 'public'] }));
    input.partners.push(partner('bad3', { groups: ['partner/org-y/docs'] }));
    input.partners.push(partner('bad4', { issuer: 'http://issuer.example' }));
    const { conflicts } = render(input);
    assert.deepEqual(
      conflicts.map((c) => [c.name, c.reason]),
      [
        ['bad3', 'Invalid'],
        ['bad4', 'Invalid'],
        ['bad', 'Invalid'],
        ['bad2', 'Invalid'],
      ],
    );
  });

  it('no platform: nothing renders, everything is reported', () => {
    const input: Resources = { ...examples(), platforms: [] };
    const { objects, conflicts } = render(input);
    assert.deepEqual(objects, []);
    assert.equal(conflicts.length, 5);
    assert.ok(conflicts.every((c) => c.reason === 'NoPlatform'));
  });

  it('an unreadable JWKS Secret renders no public route', () => {
    const input = examples();
    (input.platforms[0] as any).spec.jwt = {
      issuer: 'https://issuer.example',
      jwksSecretRef: { name: 'j', key: 'k' },
    };
    const { objects, conflicts } = render(input);
    assert.deepEqual(
      conflicts.map((c) => c.reason),
      ['JwksUnresolved'],
    );
    assert.ok(!names(objects).some((n) => n.includes('a2a-public')));
    assert.equal(projector(objects).agents[0].publicPath, undefined);
  });

  it('a partner of another issuer is registered but gets no public route', () => {
    const input = examples();
    for (const p of input.partners) p.spec.issuer = 'https://other.example';
    const { objects } = render(input);
    assert.ok(!names(objects).some((n) => n.includes('a2a-public')));
  });
});

describe('listener layout', () => {
  const strip = (input: Resources) =>
    render(input).objects.find(
      (o) => o.kind === 'AgentgatewayPolicy' && o.metadata.name === 'fgentic-strip-identity',
    ) as any;
  it('the PreRouting strip covers every A2A listener that does not also carry the MCP route', () => {
    assert.deepEqual(
      strip(examples()).spec.targetRefs.map((t: any) => t.sectionName),
      ['federation-retrieval'],
    );
    const own = examples();
    (own.platforms[0] as any).spec.gateway.mcpListener = 'knowledge-mcp';
    assert.deepEqual(
      strip(own).spec.targetRefs.map((t: any) => t.sectionName),
      ['default', 'federation-retrieval'],
    );
    assert.equal(
      render(own).objects.some((o) => o.metadata.name === 'fgentic-strip-identity-except-mcp'),
      false,
    );
    const mcpRoute = render(own).objects.find(
      (o) => o.kind === 'HTTPRoute' && o.metadata.name.startsWith('fgentic-mcp'),
    ) as any;
    assert.equal(mcpRoute.spec.parentRefs[0].sectionName, 'knowledge-mcp');
  });
  it('mcpUrl defaults to the gateway Service on :8080', () => {
    const input = examples();
    delete (input.platforms[0] as any).spec.gateway.mcpUrl;
    const rms = render(input).objects.find((o) => o.kind === 'RemoteMCPServer') as any;
    assert.equal(
      rms.spec.url,
      'http://agentgateway-proxy.agentgateway-system.svc.cluster.local:8080/mcp/knowledge-retrieval',
    );
  });
});

describe('PreRouting identity strip on a listener shared with the MCP route', () => {
  it('strips everywhere but the exact MCP path', async () => {
    const { transformationRemovals } = await import('../../local/doubles/agentgateway-cel.ts');
    const policy = render(examples()).objects.find(
      (o) => o.kind === 'AgentgatewayPolicy' && o.metadata.name === 'fgentic-strip-identity-except-mcp',
    ) as any;
    assert.deepEqual(
      policy.spec.targetRefs.map((t: any) => t.sectionName),
      ['default'],
    );
    const ctx = (path: string) => ({
      request: { method: 'POST', path, headers: { 'x-fgentic-identity': 'x' } },
    });
    const t = policy.spec.traffic.transformation;
    assert.deepEqual(transformationRemovals(t, ctx('/api/a2a/kagent/knowledge-agent')), ['x-fgentic-identity']);
    assert.deepEqual(transformationRemovals(t, ctx('/mcp/knowledge-retrieval/')), ['x-fgentic-identity']);
    assert.deepEqual(transformationRemovals(t, ctx('/mcp/knowledge-retrieval')), []);
  });
});
