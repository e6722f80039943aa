/**
 * `npm run test:cluster`: the checks only a real cluster can run, against the current kubeconfig
 * (setup: deploy/README.md "Cluster checks"). Each check is a named test. Without a reachable cluster
 * every test is skipped with that reason and the run exits 0.
 *
 * It applies deploy/base and examples/ (server-side apply), waits for the four workloads, then checks
 * the RetrievalPlatform's conditions, every ServiceAccount's rights against the RBAC table with
 * `kubectl auth can-i`, and that probe pods outside the gateway cannot reach the servers directly.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { stringify } from 'yaml';
import { REPO } from '../testkit/controller/fixtures.ts';
import { RbacAuthorizer } from '../testkit/controller/rbac.ts';
import { accessChecks, bypassProbes, canIArgs, probePod } from './checks.ts';

function kubectl(args: string[], input?: string, timeoutMs = 300_000) {
  const r = spawnSync('kubectl', args, { encoding: 'utf8', timeout: timeoutMs, ...(input ? { input } : {}) });
  return { code: r.status ?? -1, out: r.stdout ?? '', err: r.stderr ?? r.error?.message ?? '' };
}

const probe = kubectl(['cluster-info', '--request-timeout=5s'], undefined, 20_000);
const skip =
  probe.code === 0 ? false : 'no cluster reachable through the current kubeconfig (kubectl cluster-info failed)';
if (skip) process.stdout.write(`test:cluster: ${skip}; nothing to check\n`);

describe('cluster checks', { skip }, () => {
  it('deploy/base and examples/ apply server-side', () => {
    for (const args of [
      ['apply', '--server-side', '-k', join(REPO, 'deploy', 'base')],
      ['apply', '--server-side', '-f', join(REPO, 'examples')],
    ]) {
      const r = kubectl(args);
      assert.equal(r.code, 0, `kubectl ${args.join(' ')}: ${r.err}`);
    }
  });

  it('the four workloads roll out', () => {
    for (const [ns, d] of [
      ['fgentic-system', 'fgentic-controller'],
      ['fgentic-system', 'fgentic-webhook'],
      ['knowledge', 'fgentic-projector'],
      ['knowledge', 'knowledge-retrieval'],
    ] as const) {
      const r = kubectl(['-n', ns, 'rollout', 'status', `deployment/${d}`, '--timeout=300s'], undefined, 320_000);
      assert.equal(r.code, 0, `${ns}/${d}: ${r.err}`);
    }
  });

  it('the RetrievalPlatform is Ready on a supported upstream', () => {
    const r = kubectl(['get', 'retrievalplatform', 'default', '-o', 'json']);
    assert.equal(r.code, 0, r.err);
    const conditions = (JSON.parse(r.out).status?.conditions ?? []) as {
      type: string;
      status: string;
      message: string;
    }[];
    const of = (t: string) => conditions.find((c) => c.type === t);
    assert.equal(of('UpstreamSupported')?.status, 'True', of('UpstreamSupported')?.message);
    assert.equal(of('Ready')?.status, 'True', of('Ready')?.message);
  });

  describe('kubectl auth can-i for every ServiceAccount against the RBAC table', () => {
    for (const c of accessChecks(RbacAuthorizer.fromKustomize(join(REPO, 'deploy', 'base'))))
      it(c.name, () => {
        const r = kubectl(canIArgs(c), undefined, 30_000);
        assert.ok(r.code === 0 || r.code === 1, `kubectl auth can-i failed: ${r.err}`);
        assert.equal(r.code === 0, c.expect);
      });
  });

  describe('no direct path around the gateway (NetworkPolicy)', () => {
    for (const [i, p] of bypassProbes().entries())
      it(p.name, () => {
        const pod = probePod(p, i) as { metadata: { name: string; namespace: string } };
        const ref = ['-n', pod.metadata.namespace, 'pod', pod.metadata.name];
        kubectl(['delete', '--ignore-not-found', '--wait', ...ref]);
        try {
          assert.equal(kubectl(['apply', '-f', '-'], stringify(pod)).code, 0);
          let phase = '';
          for (let t = 0; t < 90 && phase !== 'Succeeded' && phase !== 'Failed'; t++) {
            phase = kubectl(['get', ...ref, '-o', 'jsonpath={.status.phase}']).out.trim();
            if (phase !== 'Succeeded' && phase !== 'Failed') spawnSync('sleep', ['2']);
          }
          assert.equal(phase, 'Failed', `${p.url} answered from ${p.namespace}: the NetworkPolicy is not enforced`);
        } finally {
          kubectl(['delete', '--ignore-not-found', '--wait=false', ...ref]);
        }
      });
  });
});
