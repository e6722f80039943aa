/**
 * Property: on the rendered local route, authorization admits a request exactly when each projected/raw
 * header occurs once, no unknown x-fgentic-* header is present and SendMessage carries no continuation
 * id — for arbitrary header multisets and message shapes (fast-check).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { authorize, type GatewayContext } from '../../local/doubles/agentgateway-cel.ts';
import { examples } from '../../testkit/controller/fixtures.ts';
import type { K8sObject } from '../types.ts';
import { render } from './index.ts';

const objects = render(examples()).objects as (K8sObject & { spec: any })[];
const withCel = objects.filter((o) => o.kind === 'AgentgatewayPolicy' && o.spec.traffic?.authorization);
const local = withCel.find((o) => o.metadata.name.startsWith('fgentic-a2a-local.'))?.spec.traffic.authorization.policy
  .matchExpressions as string[];

describe('local route authorization (property)', () => {
  it('every policy carrying CEL is one of the four tested rule sets', () => {
    assert.deepEqual(withCel.map((o) => o.metadata.name.split('.')[0]).sort(), [
      'fgentic-a2a-card',
      'fgentic-a2a-local',
      'fgentic-a2a-public',
      'fgentic-mcp',
    ]);
  });

  it('admits iff one of each header, no unknown x-fgentic-*, no continuation ids', () => {
    const count = fc.integer({ min: 0, max: 3 });
    fc.assert(
      fc.property(
        count,
        count,
        count,
        fc.boolean(),
        fc.constantFrom('SendMessage', 'GetTask', 'CancelTask', 'SendStreamingMessage', 'message/send'),
        fc.subarray(['contextId', 'taskId', 'referenceTaskIds'] as const),
        fc.constantFrom('matrix-a2a-bridge', 'kagent/knowledge-agent'),
        (users, identities, rooms, extra, method, continuation, workload) => {
          const headers: [string, string][] = [['content-type', 'application/json']];
          for (let i = 0; i < users; i++) headers.push(['X-User-Id', `@u${i}:org-a.example`]);
          for (let i = 0; i < identities; i++) headers.push(['x-fgentic-identity', `id${i}`]);
          for (let i = 0; i < rooms; i++) headers.push(['X-Fgentic-Room-Context', `rc${i}`]);
          if (extra) headers.push(['x-fgentic-extra', '1']);
          const message: Record<string, unknown> = { messageId: 'm', parts: [{ text: 'q' }] };
          for (const c of continuation) message[c] = c === 'referenceTaskIds' ? [] : '';
          const ctx: GatewayContext = {
            apiKey: { workload },
            request: {
              method: 'POST',
              path: '/api/a2a/kagent/knowledge-agent',
              headers,
              body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { message, id: 't' } }),
            },
          };
          const expected =
            users === 1 &&
            identities === 1 &&
            rooms === 1 &&
            !extra &&
            workload === 'matrix-a2a-bridge' &&
            ['SendMessage', 'GetTask', 'CancelTask'].includes(method) &&
            (method !== 'SendMessage' || continuation.length === 0);
          assert.equal(authorize('Require', local, ctx), expected);
        },
      ),
      { numRuns: 300 },
    );
  });
});
