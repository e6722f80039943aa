/**
 * The soak's database is an embedded PGlite the server reaches as an external URL (through a fault
 * proxy), so the server never migrates it (retrieval/index.ts). Prepare it as an operator would: the
 * migration step as the owner, then the embedding profile recorded by the ingestion role.
 */
import { migrate } from '../../retrieval/db/migrate.ts';
import { createPool } from '../../retrieval/db/pool.ts';
import { asRole, bootstrapDatabase, INGESTION_ROLE } from '../../retrieval/db/roles.ts';
import { createLocalEmbedder } from '../../retrieval/embeddings/local.ts';
import { ensureProfile } from '../../retrieval/embeddings/profile.ts';

export async function prepareDatabase(url: string): Promise<void> {
  const pool = createPool({ connectionString: url, max: 1 });
  try {
    await bootstrapDatabase(pool);
    await migrate(pool);
    await ensureProfile(asRole(pool, INGESTION_ROLE), createLocalEmbedder().profile, true);
  } finally {
    await pool.end();
  }
}
