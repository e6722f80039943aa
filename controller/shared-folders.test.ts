/**
 * The shared reference folders beside the repository feed the upstream-schema, upstream-detection and
 * kagent-example tests, which skip when a folder is absent. In CI (.ci/run sets
 * FGENTIC_REQUIRE_SHARED=1) an absent folder fails here, so those tests can never silently stop running.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { REPO } from './testsupport/fixtures.ts';
import { requireShared } from './testsupport/shared.ts';

const SHARED = join(REPO, '..', 'shared');
const NEEDED = [
  'upstream/agentgateway-v1.3.1/crds',
  'upstream/agentgateway-v1.3.1/gateway-api-v1.6.0-rc.1/standard',
  'upstream/agentgateway-v1.3.1/api-testdata',
  'upstream/agentgateway-v1.4.1/crds',
  'upstream/kagent-v0.9.11/kagent.dev_agents.yaml',
  'research/kagent-examples',
];

describe('shared reference folders', () => {
  it('are all present when CI requires them', {
    skip: requireShared ? false : 'FGENTIC_REQUIRE_SHARED is not 1',
  }, () => {
    const missing = NEEDED.filter((p) => !existsSync(join(SHARED, p)));
    assert.deepEqual(missing, [], `missing under ${SHARED}`);
  });
});
