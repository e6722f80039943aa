/**
 * The synthetic corpus, audiences and query sets of `bench:retrieval`. Deterministic from fixed seeds,
 * so the embedded database and any real Postgres receive identical rows and queries.
 *
 * Vectors: a 64-cluster Gaussian mixture in a 32-d latent space mapped into 1024-d by a fixed random
 * projection, L2-normalised, plus small isotropic noise — closer to text embeddings than uniform
 * noise, on which HNSW recall says nothing (docs/upstream.md#deps-pglite).
 *
 * Audiences (per selectivity s, membership uncorrelated with the vectors):
 *   matrix-1  one Matrix user who may read exactly s·N rows;
 *   matrix-3  three members (two Matrix users and one bridged user); each may read s·N shared rows
 *             plus a disjoint set of their own, so only the intersection (exactly s·N rows) is
 *             readable by the whole audience — the predicate must intersect, not union;
 *   oauth     a partner projection with two groups, one of which no row carries (exercises `?|`).
 *
 * Query sets:
 *   in   — in-distribution: half cluster centres, half fresh draws from the mixture (near the data);
 *   ood  — out-of-distribution: half random unit vectors, half antipodes of fresh draws (far from
 *          every row; cosine distances bunch up near 1, where graph search has least contrast).
 */
import type { ChunkMetadata, MatrixPrincipal, Projection } from '../contract/index.ts';
import { decodeFixture, matrixHeader, oauthHeader, prng } from '../testkit/retrieval.ts';

export const DIMS = 1024;
const LATENT = 32;
const CLUSTERS = 64;
export const GENERATOR = `${CLUSTERS}-cluster Gaussian mixture in ${LATENT}-d latent space, random projection to ${DIMS}-d, L2-normalised + noise σ 0.002`;

export type AudienceKind = 'matrix-1' | 'matrix-3' | 'oauth';
export const AUDIENCE_KINDS: readonly AudienceKind[] = ['matrix-1', 'matrix-3', 'oauth'];
export type QuerySet = 'in' | 'ood';

export interface Audience {
  readonly kind: AudienceKind;
  readonly selectivity: number;
  readonly projection: Projection;
  /** Row indexes the whole audience may read (the ground truth's filter). */
  readonly rows: ReadonlySet<number>;
}

type Gauss = () => number;

function gaussOf(rand: () => number): Gauss {
  return () => {
    const u = Math.max(rand(), 1e-12);
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rand());
  };
}

function normalise(v: Float64Array): number[] {
  let n = 0;
  for (const x of v) n += x * x;
  n = Math.sqrt(n);
  return Array.from(new Float32Array(Array.from(v, (x) => x / n)));
}

export class Corpus {
  readonly rows: number;
  private readonly projectionMatrix: Float64Array[];
  private readonly centroids: Float64Array[];
  private readonly dataRand: () => number;
  private readonly dataGauss: Gauss;

  constructor(rows: number) {
    this.rows = rows;
    const g = gaussOf(prng(20_260_730));
    this.projectionMatrix = Array.from({ length: LATENT }, () => Float64Array.from({ length: DIMS }, g));
    this.centroids = Array.from({ length: CLUSTERS }, () => Float64Array.from({ length: LATENT }, () => g() * 3));
    this.dataRand = prng(1);
    this.dataGauss = gaussOf(this.dataRand);
  }

  private lift(z: Float64Array, noise: Gauss, sigma: number): number[] {
    const v = new Float64Array(DIMS);
    for (let i = 0; i < LATENT; i++) {
      const row = this.projectionMatrix[i] as Float64Array;
      const zi = z[i] ?? 0;
      for (let d = 0; d < DIMS; d++) v[d] = (v[d] ?? 0) + zi * (row[d] ?? 0);
    }
    const u = normalise(v);
    return Array.from(new Float32Array(u.map((x) => x + noise() * sigma)));
  }

  private draw(rand: () => number, gauss: Gauss): number[] {
    const c = this.centroids[Math.floor(rand() * CLUSTERS)] as Float64Array;
    const z = Float64Array.from({ length: LATENT }, (_, i) => (c[i] ?? 0) + gauss());
    return this.lift(z, gauss, 0.002);
  }

  /** Row vectors, in row order; call once per row index, in order. */
  nextRowVector(): number[] {
    return this.draw(this.dataRand, this.dataGauss);
  }

  queries(set: QuerySet, count: number): number[][] {
    const rand = prng(set === 'in' ? 7_001 : 7_002);
    const gauss = gaussOf(rand);
    return Array.from({ length: count }, (_, i) => {
      if (set === 'in') {
        if (i % 2 === 0) return this.lift(this.centroids[(i * 7) % CLUSTERS] as Float64Array, gauss, 0);
        return this.draw(rand, gauss);
      }
      if (i % 2 === 0) return normalise(Float64Array.from({ length: DIMS }, gauss));
      return this.draw(rand, gauss).map((x) => -x);
    });
  }
}

const tag = (s: number) => String(s * 100).replace('.', '_');
const mx = (p: string): MatrixPrincipal => ({ kind: 'matrix', principal: `${p}:bench.example` });

function matrixMembers(s: number): MatrixPrincipal[] {
  return [
    mx(`@m3-${tag(s)}-a`),
    mx(`@m3-${tag(s)}-b`),
    { kind: 'bridged_matrix', network: 'slack', principal: `@slack_m3-${tag(s)}:bench.example` },
  ];
}

/** `want` distinct items of `pool` in random order (partial Fisher–Yates over a copy). */
export function sampleRows(rand: () => number, pool: readonly number[], want: number): number[] {
  const a = [...pool];
  const n = Math.min(want, a.length);
  for (let i = 0; i < n; i++) {
    const j = i + Math.floor(rand() * (a.length - i));
    [a[i], a[j]] = [a[j] as number, a[i] as number];
  }
  return a.slice(0, n);
}

export interface AclPlan {
  readonly audiences: Audience[];
  metadataFor(row: number): ChunkMetadata;
}

export function buildAcl(rows: number, selectivities: readonly number[]): AclPlan {
  const rand = prng(424_242);
  const all = Array.from({ length: rows }, (_, i) => i);
  const principals: MatrixPrincipal[][] = Array.from({ length: rows }, () => [mx('@owner')]);
  const groups: string[][] = Array.from({ length: rows }, () => []);
  const audiences: Audience[] = [];
  for (const s of selectivities) {
    const want = Math.max(1, Math.round(s * rows));
    const one = new Set(sampleRows(rand, all, want));
    const p1 = mx(`@m1-${tag(s)}`);
    for (const r of one) principals[r]?.push(p1);
    audiences.push({
      kind: 'matrix-1',
      selectivity: s,
      projection: decodeFixture(matrixHeader({ caller: p1, audience: [p1] })),
      rows: one,
    });

    const shared = sampleRows(rand, all, want);
    const sharedSet = new Set(shared);
    const members = matrixMembers(s);
    const rest = all.filter((r) => !sharedSet.has(r));
    const extraEach = Math.min(want, Math.floor(rest.length / members.length));
    const extras = sampleRows(rand, rest, extraEach * members.length);
    members.forEach((m, k) => {
      for (const r of shared) principals[r]?.push(m);
      for (const r of extras.slice(k * extraEach, (k + 1) * extraEach)) principals[r]?.push(m);
    });
    audiences.push({
      kind: 'matrix-3',
      selectivity: s,
      projection: decodeFixture(matrixHeader({ caller: members[0] as MatrixPrincipal, audience: members })),
      rows: sharedSet,
    });

    const oauthRows = new Set(sampleRows(rand, all, want));
    const group = `partner/bench/s-${tag(s).replace('_', '-')}`;
    for (const r of oauthRows) groups[r]?.push(group);
    audiences.push({
      kind: 'oauth',
      selectivity: s,
      projection: decodeFixture(oauthHeader({ policy: 'bench', groups: [group, 'partner/bench/nobody'] })),
      rows: oauthRows,
    });
  }
  return {
    audiences,
    metadataFor(row) {
      return {
        source: { id: `bench/${row % 100}` },
        classification: 'public',
        allowed_principals: principals[row] ?? [],
        allowed_groups: groups[row] ?? [],
      };
    },
  };
}

export const chunkId = (row: number) => `bench-${String(row).padStart(7, '0')}`;
export const rowOf = (chunkId: string) => Number(chunkId.slice(6));
