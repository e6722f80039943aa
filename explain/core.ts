/**
 * Why a room or a partner cannot see a chunk, and who narrows a room's knowledge. Pure: no I/O.
 *
 * Every question is asked of the database with the predicate's own rules (predicate.ts): the
 * `visible` column is buildPredicate's full WHERE for the subject, and each reason is one rule
 * (classification; one audience member; the partner's groups) evaluated on its own. The
 * interpretation refuses rows where the two disagree, so a reported reason is never a guess.
 *
 * Operator-side only: these statements count and list rows the subject cannot read, which the
 * search path never does. Nothing here is imported by a server.
 */
import {
  type AllowedClassifications,
  CLASSIFICATIONS,
  type MatrixPrincipal,
  type Projection,
} from '../contract/index.ts';
import {
  audienceRule,
  buildPredicate,
  classificationRule,
  groupsRule,
  type Predicate,
} from '../retrieval/predicate.ts';

export type Subject =
  | {
      readonly kind: 'room';
      readonly roomId: string;
      readonly audience: readonly MatrixPrincipal[];
      readonly ceiling: AllowedClassifications;
      /** Content-free remarks about the room as the projector would see it. */
      readonly notes: readonly string[];
      /**
       * The projector's reason code when it refuses every request from this room (its own decision,
       * projector/matrix.ts): then no chunk is retrievable there, whatever the rows say.
       */
      readonly refused?: string;
    }
  | {
      readonly kind: 'partner';
      readonly policyId: string;
      readonly groups: readonly string[];
      readonly ceiling: AllowedClassifications;
      readonly notes: readonly string[];
    };

export type Scope =
  | { readonly kind: 'chunk'; readonly id: string }
  | { readonly kind: 'source'; readonly id: string }
  | { readonly kind: 'all' };

export interface Statement {
  readonly text: string;
  readonly values: readonly unknown[];
}

export type Reason =
  | {
      readonly rule: 'classification';
      readonly classification: string;
      readonly ceiling: readonly string[];
    }
  | {
      readonly rule: 'reader';
      readonly reader: MatrixPrincipal;
      /** Entries of allowed_principals with the same MXID but another kind or network. */
      readonly row_lists_as: readonly { readonly kind: string; readonly network?: string }[];
    }
  | {
      readonly rule: 'groups';
      readonly row_groups: readonly string[];
      readonly partner_groups: readonly string[];
    }
  | {
      /** The projector refuses the room itself (its reason code). */
      readonly rule: 'refused';
      readonly reason: string;
    };

export interface ChunkExplanation {
  readonly chunk_id: string;
  readonly source_id: string;
  readonly classification: string;
  readonly title?: string;
  readonly visible: boolean;
  readonly reasons: readonly Reason[];
}

export interface ReaderImpact {
  readonly reader: MatrixPrincipal;
  /** In-ceiling chunks every other reader may read but this one may not: what the room gains without them. */
  readonly blocks_alone: number;
  /** In-ceiling chunks this reader may not read, whoever else also may not. */
  readonly missing_from: number;
}

export interface ClassificationCount {
  readonly classification: string;
  readonly in_ceiling: boolean;
  readonly total: number;
  readonly visible: number;
}

export interface Summary {
  readonly total: number;
  readonly visible: number;
  readonly outside_ceiling: number;
  readonly by_classification: readonly ClassificationCount[];
  /** Rooms only. */
  readonly readers?: readonly ReaderImpact[];
  /** Partners only: in-ceiling chunks that share no group with the partner. */
  readonly no_group_overlap?: number;
}

/** A fault in the explanation itself (never a statement about the data's content). */
export class ExplainError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ExplainError';
  }
}

const MAX_ROWS = 100_000;

/**
 * The projection the server would build for the subject, used only as input to buildPredicate (it
 * is never encoded or sent): the rules read its ceiling and audience or groups, nothing else.
 */
export function subjectProjection(s: Subject): Projection {
  if (s.kind === 'room') {
    const first = s.audience[0];
    if (first === undefined) throw new ExplainError('the room has no readers');
    return {
      agent: { namespace: 'explain', name: 'explain' },
      allowed_classifications: s.ceiling,
      audience: s.audience,
      delegation_id: '0'.repeat(64),
      exp: 0,
      groups: [],
      iat: 0,
      kind: first.kind,
      ...(first.kind === 'bridged_matrix' ? { network: first.network } : {}),
      principal: first.principal,
      room: {
        event_id: '$explain',
        history_visibility: 'joined',
        id: s.roomId,
        join_rule: 'invite',
        state_sha256: '0'.repeat(64),
      },
      v: 1,
    };
  }
  return {
    agent: { namespace: 'explain', name: 'explain' },
    allowed_classifications: s.ceiling,
    client: { audience: 'explain', azp: 'explain', issuer: 'https://explain.invalid', policy_id: s.policyId },
    delegation_id: '0'.repeat(64),
    exp: 0,
    groups: s.groups,
    iat: 0,
    kind: 'oidc_client',
    v: 1,
  };
}

/** Collects parameters and hands out placeholder numbers in order. */
class Params {
  readonly values: unknown[] = [];
  next(): number {
    return this.values.length + 1;
  }
  add(p: Predicate): string {
    this.values.push(...p.params);
    return `(${p.sql})`;
  }
  value(v: unknown): string {
    this.values.push(v);
    return `$${this.values.length}`;
  }
}

function scopeSql(scope: Scope, params: Params): string {
  if (scope.kind === 'chunk') return `c.chunk_id = ${params.value(scope.id)}`;
  // The same expression as the source-id index of migration 0001.
  if (scope.kind === 'source') return `(c.metadata #>> '{source,id}') = ${params.value(scope.id)}`;
  return 'TRUE';
}

interface RuleColumns {
  readonly visible: string;
  readonly classOk: string;
  readonly readers: readonly string[];
  readonly groupsOk?: string;
}

function ruleColumns(s: Subject, params: Params): RuleColumns {
  const visible = params.add(buildPredicate(subjectProjection(s), params.next()));
  const classOk = params.add(classificationRule(s.ceiling, params.next()));
  if (s.kind === 'room') {
    const readers = s.audience.map((m) => params.add(audienceRule([m], params.next())));
    return { visible, classOk, readers };
  }
  return {
    visible,
    classOk,
    readers: [],
    groupsOk: params.add(groupsRule(s.groups, s.policyId, params.next())),
  };
}

/** One row per chunk in scope, with every rule as its own boolean column. */
export function detailStatement(s: Subject, scope: Scope, opts: { titles: boolean; limit: number }): Statement {
  if (!Number.isSafeInteger(opts.limit) || opts.limit < 1 || opts.limit > MAX_ROWS)
    throw new ExplainError('limit out of range');
  const params = new Params();
  const r = ruleColumns(s, params);
  const cols = [
    'c.chunk_id',
    `(c.metadata #>> '{source,id}') AS source_id`,
    `(c.metadata->>'classification') AS classification`,
    ...(opts.titles ? [`(c.metadata #>> '{source,title}') AS title`] : []),
    `${r.visible} AS visible`,
    `${r.classOk} AS class_ok`,
  ];
  if (s.kind === 'room') {
    s.audience.forEach((m, i) => {
      cols.push(`${r.readers[i]} AS reader_${i}`);
      // The row's entries for the same MXID, whatever their kind/network: shows a native vs bridged mismatch.
      cols.push(
        `jsonb_path_query_array(c.metadata->'allowed_principals', '$[*] ? (@.principal == $p)', ` +
          `jsonb_build_object('p', ${params.value(m.principal)}::text)) AS listed_${i}`,
      );
    });
  } else {
    cols.push(`${r.groupsOk} AS groups_ok`, `(c.metadata->'allowed_groups') AS row_groups`);
  }
  const where = scopeSql(scope, params);
  // One row more than the limit tells the caller the list was cut.
  const limit = params.value(opts.limit + 1);
  return {
    text: `SELECT ${cols.join(', ')} FROM knowledge.chunks c WHERE ${where} ORDER BY c.chunk_id LIMIT ${limit}`,
    values: params.values,
  };
}

/** Counts grouped by classification and by the outcome of every rule; no row leaves as such. */
export function summaryStatement(s: Subject, scope: Scope): Statement {
  const params = new Params();
  const r = ruleColumns(s, params);
  const mask =
    s.kind === 'room' ? r.readers.map((sql, i) => `((${sql})::int << ${i})`).join(' | ') : `(${r.groupsOk})::int`;
  const where = scopeSql(scope, params);
  return {
    text:
      `SELECT classification, visible, class_ok, mask, count(*)::int AS n FROM (` +
      `SELECT (c.metadata->>'classification') AS classification, ${r.visible} AS visible, ` +
      `${r.classOk} AS class_ok, (${mask}) AS mask FROM knowledge.chunks c WHERE ${where}) t ` +
      `GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`,
    values: params.values,
  };
}

function asBool(v: unknown): boolean {
  if (typeof v !== 'boolean') throw new ExplainError('unexpected column type');
  return v;
}

function asString(v: unknown): string {
  if (typeof v !== 'string') throw new ExplainError('unexpected column type');
  return v;
}

function asStrings(v: unknown): string[] {
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw new ExplainError('unexpected column type');
  return v;
}

function listedAs(v: unknown): { kind: string; network?: string }[] {
  if (!Array.isArray(v)) throw new ExplainError('unexpected column type');
  return v.map((e) => {
    const kind = (e as { kind?: unknown })?.kind;
    const network = (e as { network?: unknown })?.network;
    if (typeof kind !== 'string') throw new ExplainError('unexpected column type');
    return typeof network === 'string' ? { kind, network } : { kind };
  });
}

/** Turn the detail rows into explanations; refuses any row where the full predicate and the rules disagree. */
export function explainRows(
  s: Subject,
  rows: readonly Record<string, unknown>[],
  limit: number,
): { chunks: ChunkExplanation[]; truncated: boolean } {
  const chunks: ChunkExplanation[] = [];
  for (const row of rows.slice(0, limit)) {
    const reasons: Reason[] = [];
    const classification = asString(row['classification']);
    if (!asBool(row['class_ok'])) reasons.push({ rule: 'classification', classification, ceiling: [...s.ceiling] });
    if (s.kind === 'room') {
      s.audience.forEach((reader, i) => {
        if (asBool(row[`reader_${i}`])) return;
        const same = (e: { kind: string; network?: string }) =>
          e.kind === reader.kind && (e.network ?? '') === (reader.kind === 'bridged_matrix' ? reader.network : '');
        reasons.push({
          rule: 'reader',
          reader,
          row_lists_as: listedAs(row[`listed_${i}`]).filter((e) => !same(e)),
        });
      });
    } else if (!asBool(row['groups_ok'])) {
      reasons.push({
        rule: 'groups',
        row_groups: asStrings(row['row_groups']),
        partner_groups: [...s.groups],
      });
    }
    const visible = asBool(row['visible']);
    if (visible !== (reasons.length === 0)) throw new ExplainError('the rules and the predicate disagree');
    const title = row['title'];
    const refused = s.kind === 'room' ? s.refused : undefined;
    chunks.push({
      chunk_id: asString(row['chunk_id']),
      source_id: asString(row['source_id']),
      classification,
      ...(typeof title === 'string' ? { title } : {}),
      // A room the projector refuses never gets a projection: nothing is visible there.
      visible: visible && refused === undefined,
      reasons: refused === undefined ? reasons : [{ rule: 'refused', reason: refused }, ...reasons],
    });
  }
  return { chunks, truncated: rows.length > limit };
}

const CLASS_ORDER = new Map<string, number>(CLASSIFICATIONS.map((c, i) => [c, i]));

/** Fold the grouped counts into the summary; refuses groups where the predicate and the rules disagree. */
export function summarize(s: Subject, rows: readonly Record<string, unknown>[]): Summary {
  const n = s.kind === 'room' ? s.audience.length : 1;
  const full = 2 ** n - 1;
  const byClass = new Map<string, { total: number; visible: number }>();
  let total = 0;
  let visible = 0;
  let outside = 0;
  let noGroups = 0;
  const alone = new Array<number>(n).fill(0);
  const missing = new Array<number>(n).fill(0);
  for (const row of rows) {
    const count = Number(row['n']);
    const mask = Number(row['mask']);
    if (!Number.isSafeInteger(count) || !Number.isSafeInteger(mask) || mask < 0 || mask > full)
      throw new ExplainError('unexpected column type');
    const cls = asString(row['classification']);
    const classOk = asBool(row['class_ok']);
    const vis = asBool(row['visible']);
    if (vis !== (classOk && mask === full)) throw new ExplainError('the rules and the predicate disagree');
    const c = byClass.get(cls) ?? { total: 0, visible: 0 };
    c.total += count;
    total += count;
    if (vis) {
      c.visible += count;
      visible += count;
    }
    byClass.set(cls, c);
    if (!classOk) {
      outside += count;
      continue;
    }
    if (s.kind === 'partner') {
      if (mask === 0) noGroups += count;
      continue;
    }
    for (let i = 0; i < n; i++) {
      const bit = 1 << i;
      if ((mask & bit) === 0) {
        missing[i] = (missing[i] ?? 0) + count;
        if ((mask | bit) === full) alone[i] = (alone[i] ?? 0) + count;
      }
    }
  }
  const ceiling = new Set<string>(s.ceiling);
  // A room the projector refuses never gets a projection: nothing is retrievable there.
  const refused = s.kind === 'room' && s.refused !== undefined;
  const by_classification = [...byClass.entries()]
    .sort(([a], [b]) => (CLASS_ORDER.get(a) ?? 99) - (CLASS_ORDER.get(b) ?? 99) || (a < b ? -1 : 1))
    .map(([classification, c]) => ({
      classification,
      in_ceiling: ceiling.has(classification),
      total: c.total,
      visible: refused ? 0 : c.visible,
    }));
  return {
    total,
    visible: refused ? 0 : visible,
    outside_ceiling: outside,
    by_classification,
    ...(s.kind === 'room'
      ? {
          readers: s.audience.map((reader, i) => ({
            reader,
            blocks_alone: alone[i] ?? 0,
            missing_from: missing[i] ?? 0,
          })),
        }
      : { no_group_overlap: noGroups }),
  };
}
