/** Output of `explain`: a table for people, JSON for scripts. Pure. Ids, sources, counts, principals, classes. */
import type { MatrixPrincipal } from '../contract/index.ts';
import type { ChunkExplanation, Reason, Subject, Summary } from './core.ts';

export interface ChunksReport {
  readonly subject: Subject;
  readonly chunks: readonly ChunkExplanation[];
  readonly truncated: boolean;
}

export interface SummaryReport {
  readonly subject: Subject;
  readonly summary: Summary;
}

function subjectJson(s: Subject) {
  return s.kind === 'room'
    ? {
        room: s.roomId,
        ceiling: s.ceiling,
        audience: s.audience,
        notes: s.notes,
        ...(s.refused ? { refused: s.refused } : {}),
      }
    : { partner: s.policyId, ceiling: s.ceiling, groups: s.groups, notes: s.notes };
}

export function chunksJson(r: ChunksReport): string {
  return `${JSON.stringify({ ...subjectJson(r.subject), chunks: r.chunks, truncated: r.truncated }, null, 2)}\n`;
}

export function summaryJson(r: SummaryReport): string {
  return `${JSON.stringify({ ...subjectJson(r.subject), summary: r.summary }, null, 2)}\n`;
}

const num = (n: number) => n.toLocaleString('en-US');

export function readerLabel(p: MatrixPrincipal): string {
  return p.kind === 'bridged_matrix' ? `${p.principal} (bridged_matrix/${p.network})` : `${p.principal} (matrix)`;
}

function table(head: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: readonly string[]) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(head), ...rows.map(line)].join('\n');
}

function header(s: Subject): string[] {
  if (s.kind === 'room') {
    return [
      `room ${s.roomId}  ceiling ${s.ceiling.join(',')}  ${s.audience.length} reader(s)`,
      ...s.audience.map((a) => `  reader ${readerLabel(a)}`),
      ...s.notes.map((n) => `  note: ${n}`),
      ...(s.refused ? [`refused: ${s.refused} (the projector denies every request from this room)`] : []),
    ];
  }
  return [
    `partner ${s.policyId}  ceiling ${s.ceiling.join(',')}  groups ${s.groups.join(',')}`,
    ...s.notes.map((n) => `  note: ${n}`),
  ];
}

export function reasonText(r: Reason): string {
  if (r.rule === 'classification')
    return `classification ${r.classification} is outside the ceiling ${r.ceiling.join(',')}`;
  if (r.rule === 'reader') {
    const also =
      r.row_lists_as.length === 0
        ? ''
        : `; the row lists this MXID as ${r.row_lists_as.map((e) => (e.network ? `${e.kind}/${e.network}` : e.kind)).join(', ')}`;
    return `reader ${readerLabel(r.reader)} is not in allowed_principals${also}`;
  }
  if (r.rule === 'refused') return `refused: ${r.reason}`;
  return `no group overlap: the row has [${r.row_groups.join(', ')}], the partner has [${r.partner_groups.join(', ')}]`;
}

export function chunksTable(r: ChunksReport): string {
  const titles = r.chunks.some((c) => c.title !== undefined);
  const rows: string[][] = [];
  for (const c of r.chunks) {
    const first = [
      c.chunk_id,
      c.source_id,
      ...(titles ? [c.title ?? ''] : []),
      c.classification,
      c.visible ? 'yes' : 'no',
    ];
    const reasons = c.reasons.map(reasonText);
    rows.push([...first, reasons[0] ?? '']);
    for (const more of reasons.slice(1)) rows.push([...first.map(() => ''), more]);
  }
  const head = ['chunk', 'source', ...(titles ? ['title'] : []), 'class', 'visible', 'why not'];
  const visible = r.chunks.filter((c) => c.visible).length;
  return [
    ...header(r.subject),
    '',
    r.chunks.length === 0 ? 'no chunk matches' : table(head, rows),
    '',
    `${num(r.chunks.length)} chunk(s)${r.truncated ? ' (list cut at --limit)' : ''}, ${num(visible)} visible`,
    '',
  ].join('\n');
}

export function summaryTable(r: SummaryReport): string {
  const s = r.summary;
  const out = [
    ...header(r.subject),
    '',
    `${num(s.total)} chunk(s) in scope; ${num(s.visible)} retrievable; ${num(s.outside_ceiling)} outside the ceiling`,
  ];
  if (r.subject.kind === 'room' && s.readers) {
    const multi = r.subject.audience.length > 1;
    out.push(
      '',
      table(
        ['reader', 'blocks alone', 'not readable by them'],
        s.readers.map((x) => [readerLabel(x.reader), num(x.blocks_alone), num(x.missing_from)]),
      ),
    );
    // A room cannot lose its last reader, so the sentence only applies to rooms of two or more, and
    // never to a room the projector refuses (it sees nothing whoever leaves).
    if (multi && !r.subject.refused) {
      for (const x of s.readers) {
        if (x.blocks_alone > 0)
          out.push(`without ${x.reader.principal} this room would see ${num(x.blocks_alone)} more chunk(s)`);
      }
    }
  } else if (s.no_group_overlap !== undefined) {
    out.push(`${num(s.no_group_overlap)} chunk(s) within the ceiling share no group with the partner`);
  }
  out.push(
    '',
    table(
      ['classification', 'in ceiling', 'chunks', 'retrievable'],
      s.by_classification.map((c) => [c.classification, c.in_ceiling ? 'yes' : 'no', num(c.total), num(c.visible)]),
    ),
    '',
  );
  return out.join('\n');
}
