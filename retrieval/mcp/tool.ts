/**
 * The one tool, `search_knowledge`: its JSON Schema 2020-12 input/output schemas (the revision's
 * default dialect), argument validation (the low-level SDK Server does not validate: deps-probe §3),
 * and result rendering as structured content plus readable text.
 */
import type { SearchHit, SearchMode } from '../search.ts';

export const TOOL_NAME = 'search_knowledge';
export const MAX_QUERY_CHARS = 4096;
const DIALECT = 'https://json-schema.org/draft/2020-12/schema';

export const INPUT_SCHEMA = {
  $schema: DIALECT,
  type: 'object',
  properties: {
    query: { type: 'string', minLength: 1, maxLength: MAX_QUERY_CHARS, description: 'What to search for.' },
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

export function parseArgs(args: unknown): ToolArgs | undefined {
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return undefined;
  const a = args as Record<string, unknown>;
  for (const k of Object.keys(a)) if (k !== 'query' && k !== 'max_results' && k !== 'mode') return undefined;
  const q = a['query'];
  if (typeof q !== 'string' || q.length < 1 || [...q].length > MAX_QUERY_CHARS || q.trim() === '')
    return undefined;
  const k = a['max_results'] ?? 5;
  if (typeof k !== 'number' || !Number.isInteger(k) || k < 1 || k > 20) return undefined;
  const mode = a['mode'] ?? 'vector';
  if (mode !== 'vector' && mode !== 'hybrid') return undefined;
  return { query: q, maxResults: k, mode };
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

/** A content-free tool error with a stable reason code. */
export function errorResult(error: 'denied' | 'invalid_arguments' | 'unavailable', reason: string) {
  return {
    isError: true,
    content: [{ type: 'text' as const, text: JSON.stringify({ error, reason }) }],
  };
}
