/**
 * The one tool, `search_knowledge`: its JSON Schema 2020-12 input/output schemas (the revision's
 * default dialect), argument validation (the low-level SDK Server does not validate: docs/upstream.md#deps-mcp-sdk),
 * and result rendering as structured content plus readable text.
 */
import { RETRIEVAL_TOOL } from '../../rules/index.ts';
import type { SearchHit, SearchMode } from '../search.ts';

export const TOOL_NAME = RETRIEVAL_TOOL;
export const MAX_QUERY_CHARS = 4096;
const DIALECT = 'https://json-schema.org/draft/2020-12/schema';

export const INPUT_SCHEMA = {
  $schema: DIALECT,
  type: 'object',
  properties: {
    query: {
      type: 'string',
      minLength: 1,
      maxLength: MAX_QUERY_CHARS,
      description: 'What to search for: at least one non-whitespace character, no U+0000 (NUL).',
    },
    max_results: { type: 'integer', minimum: 1, maximum: 20, default: 5 },
    mode: {
      type: 'string',
      enum: ['vector', 'hybrid'],
      default: 'vector',
      description: 'vector: semantic ranking; hybrid: semantic fused with keyword matches.',
    },
  },
  required: ['query'],
  additionalProperties: false,
} as const;

export const OUTPUT_SCHEMA = {
  $schema: DIALECT,
  type: 'object',
  properties: {
    results: {
      type: 'array',
      maxItems: 20,
      items: {
        type: 'object',
        properties: {
          chunk_id: { type: 'string' },
          content: { type: 'string' },
          classification: { type: 'string', enum: ['public', 'approved_non_public'] },
          source: {
            type: 'object',
            properties: {
              id: { type: 'string' },
              title: { type: 'string' },
              locator: { type: 'string' },
              revision: { type: 'string' },
              location: { type: 'string' },
            },
            required: ['id'],
            additionalProperties: false,
          },
          distance: { type: 'number' },
        },
        required: ['chunk_id', 'content', 'classification', 'source', 'distance'],
        additionalProperties: false,
      },
    },
  },
  required: ['results'],
  additionalProperties: false,
} as const;

export const TOOL = {
  name: TOOL_NAME,
  title: 'Search knowledge',
  description:
    'Search the knowledge base. Only chunks every reader of the current delegation may see are returned, with citations.',
  inputSchema: INPUT_SCHEMA,
  outputSchema: OUTPUT_SCHEMA,
  annotations: { readOnlyHint: true, openWorldHint: false },
};

export interface ToolArgs {
  readonly query: string;
  readonly maxResults: number;
  readonly mode: SearchMode;
}

/** Why arguments were refused: which argument and which rule, never the value itself. */
export interface ArgumentProblem {
  readonly argument: string;
  readonly rule: string;
}

export type ParsedArgs = { readonly ok: true; readonly value: ToolArgs } | ({ readonly ok: false } & ArgumentProblem);

const ARG_NAMES = new Set(['query', 'max_results', 'mode']);
const problem = (argument: string, rule: string): ParsedArgs => ({ ok: false, argument, rule });

/**
 * Validate `search_knowledge` arguments. Beyond the schema: the query needs a non-whitespace
 * character (nothing to rank otherwise) and may not contain U+0000, which Postgres text cannot hold
 * (the hybrid keyword query would fail in the database instead of here).
 */
export function parseArgs(args: unknown): ParsedArgs {
  if (typeof args !== 'object' || args === null || Array.isArray(args))
    return problem('arguments', 'must be an object');
  const a = args as Record<string, unknown>;
  for (const k of Object.keys(a))
    if (!ARG_NAMES.has(k)) return problem('arguments', 'only query, max_results and mode are accepted');
  const q = a['query'];
  if (q === undefined) return problem('query', 'is required');
  if (typeof q !== 'string') return problem('query', 'must be a string');
  if ([...q].length > MAX_QUERY_CHARS) return problem('query', `must be at most ${MAX_QUERY_CHARS} characters`);
  if (q.includes('\u0000')) return problem('query', 'must not contain U+0000 (NUL)');
  if (q.trim() === '') return problem('query', 'must contain a non-whitespace character');
  const k = a['max_results'] ?? 5;
  if (typeof k !== 'number' || !Number.isInteger(k) || k < 1 || k > 20)
    return problem('max_results', 'must be an integer from 1 to 20');
  const mode = a['mode'] ?? 'vector';
  if (mode !== 'vector' && mode !== 'hybrid') return problem('mode', 'must be "vector" or "hybrid"');
  return { ok: true, value: { query: q, maxResults: k, mode } };
}

const SOURCE_KEYS = ['id', 'title', 'locator', 'revision', 'location'] as const;

export function renderResult(hits: readonly SearchHit[]) {
  const results = hits.map((h) => {
    const source: Record<string, string> = {};
    for (const k of SOURCE_KEYS) {
      const v = h.metadata.source[k];
      if (typeof v === 'string') source[k] = v;
    }
    return {
      chunk_id: h.chunk_id,
      content: h.content,
      classification: h.metadata.classification,
      source,
      distance: h.distance,
    };
  });
  const text =
    results.length === 0
      ? 'No authorized knowledge matched.'
      : results
          .map((r, i) => {
            const cite = [r.source['title'], r.source['locator'] ?? r.source.id].filter(Boolean).join(' — ');
            return `[${i + 1}] ${cite} (${r.classification}, ${r.chunk_id})\n${r.content}`;
          })
          .join('\n\n');
  return { structuredContent: { results }, content: [{ type: 'text' as const, text }] };
}

/**
 * A content-free tool error with a stable reason code; argument errors also name the argument and
 * the rule, so a model can correct its call (MCP 2025-11-25: input validation failures are tool
 * execution errors, not protocol errors).
 */
export function errorResult(
  error: 'denied' | 'invalid_arguments' | 'unavailable',
  reason: string,
  detail?: ArgumentProblem,
) {
  const body = detail ? { error, reason, argument: detail.argument, rule: detail.rule } : { error, reason };
  return {
    isError: true,
    content: [{ type: 'text' as const, text: JSON.stringify(body) }],
  };
}
