/**
 * The 60-second soak smoke: the whole fault schedule, compressed, against a fresh stack on the
 * engine under test. The oracle must see traffic that was served and traffic that was refused, and
 * no wrong allow or leaked row. On PostgreSQL the schedule adds a real database fault: the server
 * stopped and started mid-run, and the serving connections terminated. (Latency and error rates are
 * reported by `npm run soak`, never asserted here.)
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ENGINE } from '../../testkit/retrieval.ts';
import { formatReport, runSoak } from './run.ts';

test('soak smoke (60 s, every fault): 0 wrong allows, 0 leaked rows', { timeout: 15 * 60_000 }, async () => {
  const report = await runSoak({ durationMs: 60_000, engine: ENGINE });
  const table = formatReport(report);
  assert.equal(report.faults.length, ENGINE === 'postgres' ? 15 : 13, table);
  if (ENGINE === 'postgres') {
    // The termination fault found serving connections to end: the fault was real, not a no-op.
    const ended = report.faults.find((f) => f.fault.startsWith('serving connections terminated'));
    assert.match(ended?.note ?? '', /^[1-9]\d* then/, table);
  }
  assert.ok(report.operations >= 60, table);
  assert.ok(report.byKind.matrix > 0 && report.byKind.partner > 0 && report.byKind.mcp > 0, table);
  // The oracle judged served and refused traffic, so the zeros below are not vacuous.
  assert.ok(report.overall.errorRate !== null && report.overall.errorRate < 1, table);
  assert.equal(report.wrongAllows, 0, table);
  assert.equal(report.leakedRows, 0, table);
  assert.equal(report.staleDecisions, 0, table);
  assert.equal(report.harnessErrors, 0, table);
});
