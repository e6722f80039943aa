/**
 * Where the retrieval server's searches may go besides the primary (`RetrievalPlatform.spec.database`
 * → `retrieval.json` `database`; retrieval/README.md "Past one database server"): read replicas, the
 * revocation bound on them, and whether every database URL is a pooler in transaction mode. One rule
 * for the CRD, the webhook, the render and the server's loader; the server's flags and environment
 * use the bound and the pooler modes from here too (retrieval/cli.ts).
 *
 * A replica URL in a RetrievalPlatform ends up in a ConfigMap, so it may carry no credential: the
 * server logs in with PGUSER/PGPASSWORD, as on the primary. The grammar:
 * `postgres[ql]://host[:port][/database][?key=value&...]` with
 * - host: DNS labels (an IPv4 address is one of those) or a bracketed IPv6 address;
 * - database: unreserved characters and percent-escapes;
 * - query: `key=value` pairs, keys of letters and `_` (libpq's parameter names), values of
 *   unreserved characters, `/`, `:`, `+`, `,` and percent-escapes (`sslrootcert=/var/run/...`);
 *   `user` and any key ending in `password` are refused (node-postgres reads every query key as a
 *   setting);
 * - no user information, no fragment; at most 2,048 characters.
 * Pure.
 */
import { IPV6_BRACKETED_SOURCE } from '../contract/index.ts';
import { celString } from './names.ts';
import { at, isIntegerIn, oneOf, type Problem, problem } from './result.ts';

/** `none`: the URLs are PostgreSQL servers; `transaction`: PgBouncer (or alike) in transaction mode. */
export const POOLER_MODES = ['none', 'transaction'] as const;
export type PoolerMode = (typeof POOLER_MODES)[number];
export const DEFAULT_POOLER: PoolerMode = POOLER_MODES[0];

export const isPoolerMode = oneOf(POOLER_MODES);

/** How long after its commit an ACL change may still be missed by a replica's search, ms. */
export const MAX_REPLICA_LAG = { min: 100, max: 60_000, default: 1_000 } as const;
export const MAX_REPLICAS = 8;
export const DATABASE_URL_MAX = 2048;

const DNS_LABEL = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
const HOST = `(?:${DNS_LABEL}(?:\\.${DNS_LABEL})*|${IPV6_BRACKETED_SOURCE})`;
const PORT = '(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])';
const ESCAPE = '%[0-9A-Fa-f]{2}';
const DATABASE = `(?:/(?:[A-Za-z0-9._~-]|${ESCAPE})*)?`;
const PAIR = `[A-Za-z_]+=(?:[A-Za-z0-9._~/:+,-]|${ESCAPE})*`;

export const DATABASE_URL_PATTERN = `^postgres(?:ql)?://${HOST}(?::${PORT})?${DATABASE}(?:\\?${PAIR}(?:&${PAIR})*)?$`;
/** A query key that would put a credential in the URL. */
const CREDENTIAL_KEY = '[?&](?:user|[A-Za-z_]*password)=';

const URL_RE = new RegExp(DATABASE_URL_PATTERN);
const CREDENTIAL_RE = new RegExp(CREDENTIAL_KEY);

/** The CRD's rule beside the pattern (RE2 has no lookahead), from the same source. */
export const DATABASE_URL_CEL = [
  {
    rule: `!self.matches(${celString(CREDENTIAL_KEY)})`,
    message: 'no user or password in the URL: the server logs in with PGUSER/PGPASSWORD',
  },
] as const;

export const DATABASE_URL_SCHEMA = {
  pattern: DATABASE_URL_PATTERN,
  maxLength: DATABASE_URL_MAX,
  'x-kubernetes-validations': DATABASE_URL_CEL.map((c) => ({ ...c })),
} as const;

/** A credential-free PostgreSQL URL of the grammar above. */
export function isDatabaseUrl(v: unknown): v is string {
  return typeof v === 'string' && v.length <= DATABASE_URL_MAX && URL_RE.test(v) && !CREDENTIAL_RE.test(v);
}

/** The replica settings with defaults applied. */
export interface ReplicaSettings {
  readonly replicaUrls: readonly string[];
  readonly maxReplicaLagMilliseconds: number;
  readonly pooler: PoolerMode;
}

export const DEFAULT_REPLICA_SETTINGS: ReplicaSettings = {
  replicaUrls: [],
  maxReplicaLagMilliseconds: MAX_REPLICA_LAG.default,
  pooler: DEFAULT_POOLER,
};

export const REPLICA_FIELDS = ['replicaUrls', 'maxReplicaLagMilliseconds', 'pooler'] as const;

export const isMaxReplicaLag = (v: unknown): v is number => isIntegerIn(v, MAX_REPLICA_LAG);

export const MAX_REPLICA_LAG_MESSAGE = `must be an integer ${MAX_REPLICA_LAG.min}-${MAX_REPLICA_LAG.max} (milliseconds)`;

/**
 * The replica fields of an object (`spec.database` of a RetrievalPlatform, `database` of
 * retrieval.json); other fields are the caller's. Absent fields take their defaults; null is a
 * wrong type like any other. A URL is never echoed: a problem names its index.
 */
export function checkReplicaSettings(o: Record<string, unknown>, path: string): Problem[] {
  const out: Problem[] = [];
  const urls = o['replicaUrls'];
  if (urls !== undefined) {
    if (!Array.isArray(urls) || urls.length > MAX_REPLICAS)
      out.push(problem('replica-urls', at(path, 'replicaUrls'), `must be a list of at most ${MAX_REPLICAS}`));
    else {
      urls.forEach((u, i) => {
        if (!isDatabaseUrl(u))
          out.push(
            problem(
              'database-url',
              `${at(path, 'replicaUrls')}[${i}]`,
              `must be postgres://host[:port][/database][?key=value&...] without user or password, at most ${DATABASE_URL_MAX}`,
            ),
          );
      });
      if (new Set(urls).size !== urls.length)
        out.push(problem('replica-urls', at(path, 'replicaUrls'), 'must not repeat a URL'));
    }
  }
  if ('maxReplicaLagMilliseconds' in o && !isMaxReplicaLag(o['maxReplicaLagMilliseconds']))
    out.push(problem('replica-lag', at(path, 'maxReplicaLagMilliseconds'), MAX_REPLICA_LAG_MESSAGE));
  if ('pooler' in o && !isPoolerMode(o['pooler']))
    out.push(problem('pooler', at(path, 'pooler'), `must be ${POOLER_MODES.join(' or ')}`));
  return out;
}

/** The settings with defaults applied, or undefined when `checkReplicaSettings` reports a problem. */
export function replicaSettings(o: Record<string, unknown> | undefined): ReplicaSettings | undefined {
  const v = o ?? {};
  if (checkReplicaSettings(v, 'database').length > 0) return undefined;
  return {
    replicaUrls: [...((v['replicaUrls'] as string[] | undefined) ?? [])],
    maxReplicaLagMilliseconds: (v['maxReplicaLagMilliseconds'] as number | undefined) ?? MAX_REPLICA_LAG.default,
    pooler: (v['pooler'] as PoolerMode | undefined) ?? DEFAULT_POOLER,
  };
}

/** Settings that change nothing: no replica and no pooler (the lag bound alone has no effect). */
export function isDirect(s: ReplicaSettings): boolean {
  return s.replicaUrls.length === 0 && s.pooler === 'none';
}
