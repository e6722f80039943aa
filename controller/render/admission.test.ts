/**
 * Cross-check with the admission webhook (webhook/, offline mode): the rendered kagent Agent and
 * RemoteMCPServer are admitted for the controller's ServiceAccount, and refused for anyone else.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { examples } from '../../testkit/controller/fixtures.ts';
import type { Manifest } from '../../webhook/manifests.ts';
import { checkManifests } from '../../webhook/offline.ts';
import { CONTROLLER_USER } from '../../webhook/rules/types.ts';
import { render } from './index.ts';

function manifests(): Manifest[] {
  const input = examples();
  // As in the cluster: the owner has a uid, so the rendered Agent carries its owner reference.
  for (const a of input.agents) a.metadata.uid = '3f1c2a9e-0000-4000-8000-000000000001';
  for (const p of input.platforms) p.metadata.uid = '3f1c2a9e-0000-4000-8000-000000000002';
  const own = [...input.platforms, ...input.agents, ...input.rooms, ...input.partners];
  return [...own, ...render(input).objects].map((o, index) => ({
    source: 'render',
    index,
    object: o as never,
  }));
}

describe('rendered kagent objects pass the admission webhook', () => {
  it('admitted for the controller, with no warnings', () => {
    const results = checkManifests(manifests(), CONTROLLER_USER).filter((r) => r.verdict !== 'skipped');
    const agent = results.find((r) => r.kind === 'Agent');
    const rms = results.find((r) => r.kind === 'RemoteMCPServer');
    assert.equal(agent?.verdict, 'allowed', agent?.message);
    assert.deepEqual(agent?.warnings, []);
    assert.equal(rms?.verdict, 'allowed', rms?.message);
    assert.ok(
      results.every((r) => r.verdict === 'allowed'),
      JSON.stringify(results.filter((r) => r.verdict !== 'allowed')),
    );
  });
  it('denied for another user', () => {
    const results = checkManifests(manifests(), 'system:serviceaccount:kagent:someone');
    assert.equal(results.find((r) => r.kind === 'Agent')?.verdict, 'denied');
  });
});
