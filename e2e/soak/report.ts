/** The soak's report: error rates and latencies overall and around each fault, memory, the oracle's counts. */
import type { Op, OpKind } from './traffic.ts';

export interface FaultWindow {
  readonly name: string;
  readonly start: number;
  readonly end: number;
  readonly note?: string;
}

export interface PhaseStats {
  readonly ops: number;
  readonly errorRate: number | null;
  readonly p50Ms: number | null;
  readonly p99Ms: number | null;
}

export interface FaultReport {
  readonly fault: string;
  readonly startS: number;
  readonly durationS: number;
  readonly note?: string;
  readonly before: PhaseStats;
  readonly during: PhaseStats;
  readonly after: PhaseStats;
  /** From the end of the fault to the first of three consecutive good operations; null: never. */
  readonly recoverMs: number | null;
}

export interface MemorySample {
  readonly parentRss: number;
  readonly parentHeapUsed: number;
  readonly projectorRss: number | undefined;
  readonly retrievalRss: number | undefined;
}

export interface SoakReport {
  readonly durationS: number;
  readonly operations: number;
  readonly byKind: Record<OpKind, number>;
  readonly wrongAllows: number;
  readonly leakedRows: number;
  readonly staleDecisions: number;
  readonly ambiguous: number;
  /** Operations the soak itself could not prepare (never a server response); not in the counts. */
  readonly harnessErrors: number;
  readonly overall: PhaseStats;
  readonly faults: FaultReport[];
  readonly memory: { readonly start: MemorySample; readonly end: MemorySample };
  /** Parent heap growth (after GC when available) must stay under this. */
  readonly heapGrowthBoundBytes: number;
  readonly heapGrowthBytes: number;
}

export const HEAP_GROWTH_BOUND_BYTES = 64 * 1024 * 1024;

function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function phase(ops: Op[]): PhaseStats {
  const judged = ops.filter((o) => o.ok !== undefined);
  const lat = ops.map((o) => o.end - o.start).sort((a, b) => a - b);
  return {
    ops: ops.length,
    errorRate: judged.length === 0 ? null : judged.filter((o) => o.ok === false).length / judged.length,
    p50Ms: percentile(lat, 50),
    p99Ms: percentile(lat, 99),
  };
}

/** The traffic before, during and after each fault (`ops` sorted by start), and when it recovered. */
function faultReports(ops: Op[], faults: FaultWindow[], t0: number, windowMs: number): FaultReport[] {
  const between = (a: number, b: number) => ops.filter((o) => o.start >= a && o.start < b);
  return faults.map((f) => {
    let recoverMs: number | null = null;
    const judged = ops.filter((o) => o.start >= f.end && o.ok !== undefined);
    for (let i = 0; i + 2 < judged.length; i++) {
      if (judged[i]!.ok && judged[i + 1]!.ok && judged[i + 2]!.ok) {
        recoverMs = Math.max(0, judged[i]!.end - f.end);
        break;
      }
    }
    return {
      fault: f.name,
      startS: Math.round((f.start - t0) / 100) / 10,
      durationS: Math.round((f.end - f.start) / 100) / 10,
      ...(f.note ? { note: f.note } : {}),
      before: phase(between(f.start - windowMs, f.start)),
      during: phase(between(f.start, f.end)),
      after: phase(between(f.end, f.end + windowMs)),
      recoverMs,
    };
  });
}

export interface RunRecord {
  readonly ops: Op[];
  readonly faults: FaultWindow[];
  readonly t0: number;
  readonly tEnd: number;
  /** The time between two faults of the schedule. */
  readonly slotMs: number;
  readonly harnessErrors: number;
  readonly memory: { readonly start: MemorySample; readonly end: MemorySample };
}

export function buildReport(r: RunRecord): SoakReport {
  const ops = [...r.ops].sort((a, b) => a.start - b.start);
  const windowMs = Math.min(15_000, r.slotMs / 3);
  const byKind = { matrix: 0, partner: 0, mcp: 0 } as Record<OpKind, number>;
  for (const o of ops) byKind[o.kind]++;
  return {
    durationS: Math.round((r.tEnd - r.t0) / 1000),
    operations: ops.length,
    byKind,
    wrongAllows: ops.filter((o) => o.wrongAllow).length,
    leakedRows: ops.reduce((n, o) => n + o.leaked, 0),
    staleDecisions: ops.filter((o) => o.stale).length,
    ambiguous: ops.filter((o) => o.ok === undefined).length,
    harnessErrors: r.harnessErrors,
    overall: phase(ops),
    faults: faultReports(ops, r.faults, r.t0, windowMs),
    memory: r.memory,
    heapGrowthBoundBytes: HEAP_GROWTH_BOUND_BYTES,
    heapGrowthBytes: r.memory.end.parentHeapUsed - r.memory.start.parentHeapUsed,
  };
}

const pct = (x: number | null) => (x === null ? '–' : `${(x * 100).toFixed(1)}%`);
const ms = (x: number | null) => (x === null ? '–' : `${Math.round(x)}`);
const mb = (x: number | undefined) => (x === undefined ? '–' : `${(x / 1048576).toFixed(0)} MB`);

/** The per-fault table. */
function faultTable(faults: FaultReport[]): string[] {
  const head = [
    'fault',
    'at s',
    'len s',
    'err during',
    'err after',
    'recover ms',
    'p50 before/during/after ms',
    'p99 before/during/after ms',
  ];
  const rows = faults.map((f) => [
    f.fault,
    String(f.startS),
    String(f.durationS),
    pct(f.during.errorRate),
    pct(f.after.errorRate),
    ms(f.recoverMs),
    `${ms(f.before.p50Ms)} / ${ms(f.during.p50Ms)} / ${ms(f.after.p50Ms)}`,
    `${ms(f.before.p99Ms)} / ${ms(f.during.p99Ms)} / ${ms(f.after.p99Ms)}`,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const fmt = (row: string[]) => row.map((c, i) => c.padEnd(widths[i]!)).join(' | ');
  return [fmt(head), widths.map((w) => '-'.repeat(w)).join('-|-'), ...rows.map(fmt)];
}

export function formatReport(r: SoakReport): string {
  const lines: string[] = [];
  lines.push(
    `soak: ${r.durationS} s, ${r.operations} operations (matrix ${r.byKind.matrix}, partner ${r.byKind.partner}, mcp ${r.byKind.mcp}), ${r.ambiguous} not judged (membership or registry changed in flight), ${r.harnessErrors} harness errors`,
  );
  lines.push(
    `oracle: wrong allows ${r.wrongAllows}, leaked rows ${r.leakedRows}, decisions older than the revocation bound ${r.staleDecisions}`,
  );
  lines.push(
    `overall: error rate ${pct(r.overall.errorRate)}, p50 ${ms(r.overall.p50Ms)} ms, p99 ${ms(r.overall.p99Ms)} ms`,
  );
  lines.push('');
  lines.push(...faultTable(r.faults));
  for (const f of r.faults) if (f.note) lines.push(`  ${f.fault}: ${f.note}`);
  lines.push('');
  const m = r.memory;
  lines.push(
    `memory start → end: parent RSS ${mb(m.start.parentRss)} → ${mb(m.end.parentRss)}, parent heap ${mb(m.start.parentHeapUsed)} → ${mb(m.end.parentHeapUsed)} (growth bound ${mb(r.heapGrowthBoundBytes)}), projector RSS ${mb(m.start.projectorRss)} → ${mb(m.end.projectorRss)}, retrieval RSS ${mb(m.start.retrievalRss)} → ${mb(m.end.retrievalRss)}`,
  );
  return lines.join('\n');
}
