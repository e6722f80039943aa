/**
 * Test-only: tests that read the shared reference folders beside the repository (upstream CRDs,
 * research examples) skip when a folder is absent, so a plain clone still tests green. CI sets
 * FGENTIC_REQUIRE_SHARED=1 (.ci/run): then a missing folder is a failure, never a silent skip.
 */
import { existsSync } from 'node:fs';

export const requireShared = process.env['FGENTIC_REQUIRE_SHARED'] === '1';

/** The node:test `skip` value for tests that need `dir`: false (run) when present or required. */
export function sharedSkip(dir: string, what: string): false | string {
  if (existsSync(dir) || requireShared) return false;
  return `skipped: ${dir} (${what}) is absent; FGENTIC_REQUIRE_SHARED=1 makes this a failure`;
}
