/**
 * How serve retrieval reaches its databases: the read replicas, the revocation bound on them and the
 * pooler mode, from the flags and the environment or from the configuration's `database` section
 * (rules/database.ts holds the bounds), and the TLS settings for DATABASE_URL.
 */
import { UsageError } from '../common/args.ts';
import {
  isDirect,
  isMaxReplicaLag,
  isPoolerMode,
  MAX_REPLICA_LAG,
  MAX_REPLICA_LAG_MESSAGE,
  MAX_REPLICAS,
  POOLER_MODES,
  type ReplicaSettings,
} from '../rules/database.ts';

export interface DatabaseTopology {
  /** Read replicas searches may use (retrieval/replica-set.ts). */
  readonly replicaUrls: readonly string[];
  /** The revocation bound on replicas, ms. */
  readonly maxReplicaLagMs: number;
  /** Every database URL is a pooler in transaction mode. */
  readonly pooler?: 'transaction';
}

/** The topology the flags and environment give, and whether they gave any of it. */
export type FlaggedTopology = DatabaseTopology & { readonly explicit: boolean };

/**
 * TLS for DATABASE_URL: `sslmode`/`sslrootcert` in the URL work as usual; DATABASE_CA_FILE adds a CA
 * bundle and DATABASE_TLS=require forces verified TLS (the origin cluster rejects non-TLS: docs/upstream.md#origin-knowledge-store-placement).
 */
export function tlsFromEnv(): { caFile?: string; requireTls?: boolean } {
  const ca = process.env['DATABASE_CA_FILE'];
  return {
    ...(ca ? { caFile: ca } : {}),
    ...(process.env['DATABASE_TLS'] === 'require' ? { requireTls: true } : {}),
  };
}

/**
 * The replica URLs from `--replica-url` (repeatable) and `DATABASE_REPLICA_URLS` (comma-separated),
 * each a postgres:// URL. A URL may carry a password, so a problem names its position only. Pure.
 */
function replicaUrlsFrom(
  values: Record<string, unknown>,
  env: Readonly<Record<string, string | undefined>>,
  hasPrimary: boolean,
): string[] {
  const flagged = (values['replica-url'] as string[] | undefined) ?? [];
  const fromEnv = (env['DATABASE_REPLICA_URLS'] ?? '')
    .split(',')
    .map((u) => u.trim())
    .filter((u) => u !== '');
  const replicaUrls = [...flagged, ...fromEnv];
  replicaUrls.forEach((u, i) => {
    let scheme: string | undefined;
    try {
      scheme = new URL(u).protocol;
    } catch {
      scheme = undefined;
    }
    if (scheme !== 'postgres:' && scheme !== 'postgresql:')
      throw new UsageError(`replica URL #${i + 1} must be a postgres:// URL`);
  });
  if (replicaUrls.length > MAX_REPLICAS) throw new UsageError(`at most ${MAX_REPLICAS} replica URLs`);
  if (replicaUrls.length > 0 && !hasPrimary) throw new UsageError('replica URLs need DATABASE_URL (the primary)');
  return replicaUrls;
}

/**
 * The read replicas and pooler mode from the flags and the environment: `--replica-url` (repeatable)
 * and `DATABASE_REPLICA_URLS` (comma-separated; from a Secret, like DATABASE_URL) together,
 * `--max-replica-lag MS`, `--pooler transaction` or `DATABASE_POOLER=transaction`. These URLs may
 * carry a password, so a URL is never echoed: a problem names its position only. `explicit` says
 * whether any of them was given. Pure.
 */
export function databaseTopology(
  values: Record<string, unknown>,
  env: Readonly<Record<string, string | undefined>>,
  hasPrimary: boolean,
): FlaggedTopology {
  const replicaUrls = replicaUrlsFrom(values, env, hasPrimary);
  const rawLag = values['max-replica-lag'] as string | undefined;
  const maxReplicaLagMs = rawLag === undefined ? MAX_REPLICA_LAG.default : Number(rawLag);
  if (!isMaxReplicaLag(maxReplicaLagMs)) throw new UsageError(`--max-replica-lag ${MAX_REPLICA_LAG_MESSAGE}`);
  const pooler = (values['pooler'] as string | undefined) ?? env['DATABASE_POOLER'];
  if (pooler !== undefined && !isPoolerMode(pooler))
    throw new UsageError(`--pooler (DATABASE_POOLER) must be ${POOLER_MODES.join(' or ')}`);
  if (pooler === 'transaction' && !hasPrimary) throw new UsageError('--pooler needs DATABASE_URL');
  return {
    replicaUrls,
    maxReplicaLagMs,
    ...(pooler === 'transaction' ? { pooler } : {}),
    explicit: replicaUrls.length > 0 || rawLag !== undefined || pooler !== undefined,
  };
}

/**
 * The topology the server starts with: the configuration's `database` section (rendered from the
 * RetrievalPlatform) or the flags and environment, never a mix of both, which would leave an
 * operator guessing which bound holds. Throws a UsageError naming both sources. Pure.
 */
export function startTopology(
  flagged: FlaggedTopology,
  configured: ReplicaSettings,
  hasPrimary: boolean,
): DatabaseTopology {
  const fromConfig = !isDirect(configured);
  if (fromConfig && flagged.explicit)
    throw new UsageError(
      'replica settings come from the configuration (database) or from --replica-url/--max-replica-lag/--pooler and DATABASE_REPLICA_URLS/DATABASE_POOLER, not both',
    );
  if (!fromConfig)
    return {
      replicaUrls: flagged.replicaUrls,
      maxReplicaLagMs: flagged.maxReplicaLagMs,
      ...(flagged.pooler ? { pooler: flagged.pooler } : {}),
    };
  if (!hasPrimary) throw new UsageError("the configuration's database section needs DATABASE_URL (the primary)");
  return {
    replicaUrls: configured.replicaUrls,
    maxReplicaLagMs: configured.maxReplicaLagMilliseconds,
    ...(configured.pooler === 'transaction' ? { pooler: 'transaction' as const } : {}),
  };
}
