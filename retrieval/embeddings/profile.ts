/**
 * The embedding profile recorded in fgentic.embedding_profile (docs/decisions.md#d7-origin-schema). Vectors from
 * different profiles are not comparable, so a mismatch means: refuse to serve, /readyz false.
 */
import type pg from 'pg';
import { BGE_M3_PROFILE } from './openai.ts';

export type ProfileState =
  | { readonly ok: true; readonly profile: string }
  | {
      readonly ok: false;
      readonly reason: 'profile_mismatch' | 'profile_unrecorded';
      readonly stored?: string;
    };

/** Through fgentic.embedding_profile_v1 (migration 0001_baseline.sql), which both the retrieval and the ingestion role may call. */
export async function readProfile(db: pg.Pool | pg.PoolClient): Promise<string | undefined> {
  const r = await db.query('SELECT fgentic.embedding_profile_v1() AS profile');
  return (r.rows[0]?.profile as string | null | undefined) ?? undefined;
}

/**
 * Check the database profile against ours. With `claim`, an unrecorded profile is recorded — but
 * only when no chunks exist yet, or when ours is the origin's `bge-m3-1024-v1` (an origin database
 * predates the profile table and holds BGE-M3 vectors). Claiming writes, so it runs as the ingestion
 * role; the serving role only checks.
 */
export async function ensureProfile(pool: pg.Pool, profile: string, claim: boolean): Promise<ProfileState> {
  const stored = await readProfile(pool);
  if (stored !== undefined) {
    return stored === profile ? { ok: true, profile } : { ok: false, reason: 'profile_mismatch', stored };
  }
  if (!claim) return { ok: false, reason: 'profile_unrecorded' };
  // An origin database predates the profile and holds BGE-M3 vectors: only that profile adopts rows
  // already there. The claim itself is one statement that records a profile only when none is.
  const rows = await pool.query('SELECT fgentic.origin_has_rows_v1() AS any');
  if (rows.rows[0]?.any === true && profile !== BGE_M3_PROFILE) return { ok: false, reason: 'profile_mismatch' };
  const r = await pool.query('SELECT fgentic.claim_embedding_profile_v1($1) AS profile', [profile]);
  const final = String(r.rows[0]?.profile ?? '');
  return final === profile ? { ok: true, profile } : { ok: false, reason: 'profile_mismatch', stored: final };
}
