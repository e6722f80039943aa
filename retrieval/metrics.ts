/** Prometheus metrics on a registry of our own (never the global default). Labels are reason codes only. */

import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { IDENTITY_HEADER_NAME, RETRIEVAL_TOOL } from '../rules/index.ts';

export interface RetrievalMetrics {
  readonly registry: Registry;
  readonly toolCalls: Counter<'outcome'>;
  readonly denials: Counter<'reason'>;
  readonly missingCarrier: Counter;
  readonly searchSeconds: Histogram<'plan' | 'mode'>;
  readonly embedSeconds: Histogram;
  readonly httpSeconds: Histogram<'route' | 'status'>;
  /** What the `fgentic_retrieval_ready` gauge evaluates on each scrape (the /readyz check). */
  setReadinessProbe(probe: () => Promise<boolean>): void;
}

export function createMetrics(defaults = false): RetrievalMetrics {
  const registry = new Registry();
  if (defaults) collectDefaultMetrics({ register: registry });
  const buckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
  let probe: (() => Promise<boolean>) | undefined;
  // Evaluated on scrape, so an idle server with an unreachable database is visible (the per-call
  // `database_unavailable` denials only count traffic).
  new Gauge({
    name: 'fgentic_retrieval_ready',
    help: '1 when the database is reachable and its embedding profile matches (what /readyz answers), else 0.',
    registers: [registry],
    async collect() {
      this.set(probe && (await probe().catch(() => false)) ? 1 : 0);
    },
  });
  return {
    registry,
    setReadinessProbe(p) {
      probe = p;
    },
    toolCalls: new Counter({
      name: 'fgentic_retrieval_tool_calls_total',
      help: `${RETRIEVAL_TOOL} calls by outcome (ok, denied, invalid_arguments, unavailable).`,
      labelNames: ['outcome'],
      registers: [registry],
    }),
    denials: new Counter({
      name: 'fgentic_retrieval_denials_total',
      help: 'Refused tool calls by stable reason code.',
      labelNames: ['reason'],
      registers: [registry],
    }),
    missingCarrier: new Counter({
      name: 'fgentic_retrieval_tool_calls_without_carrier_total',
      help: `tools/call requests that arrived with no ${IDENTITY_HEADER_NAME} (a lost carrier: check the gateway and kagent header propagation).`,
      registers: [registry],
    }),
    searchSeconds: new Histogram({
      name: 'fgentic_retrieval_search_duration_seconds',
      help: 'Authorized search latency in the database, by plan and mode.',
      labelNames: ['plan', 'mode'],
      buckets,
      registers: [registry],
    }),
    embedSeconds: new Histogram({
      name: 'fgentic_retrieval_embedding_duration_seconds',
      help: 'Query embedding latency.',
      buckets,
      registers: [registry],
    }),
    httpSeconds: new Histogram({
      name: 'fgentic_retrieval_http_request_duration_seconds',
      help: 'HTTP request latency by route and status.',
      labelNames: ['route', 'status'],
      buckets,
      registers: [registry],
    }),
  };
}
