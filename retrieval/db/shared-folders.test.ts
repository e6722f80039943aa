/**
 * The one reference folder the repository cannot hold, the origin platform's knowledge-store schema
 * (its own SQL, read by origin-fixture.ts), feeds the origin and MXID tests, which skip when it is
 * absent. In CI (.ci/run sets FGENTIC_REQUIRE_SHARED=1) an absent folder fails here, so those tests
 * can never silently stop running. Every other fixture is in the repository.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { requireShared } from '../../testkit/common/index.ts';
import { ORIGIN_SCHEMA_DIR } from '../../testkit/origin-fixture.ts';

const NEEDED = ['knowledge-schema-v1.yaml', 'knowledge-schema-v2.yaml', 'knowledge-schema-v3.yaml'];

describe('shared reference folders', () => {
  it('the origin schema is present when CI requires it', {
    skip: requireShared ? false : 'FGENTIC_REQUIRE_SHARED is not 1',
  }, () => {
    const missing = NEEDED.filter((p) => !existsSync(join(ORIGIN_SCHEMA_DIR, p)));
    assert.deepEqual(missing, [], `missing under ${ORIGIN_SCHEMA_DIR}`);
  });
});
