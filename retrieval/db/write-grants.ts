/**
 * `npm run docs:grants`: migrate an empty embedded database with this project's migrations in ledger
 * mode (plain mode grants the same minus everything on `fgentic_ledger`) and write the roles'
 * privileges into retrieval/README.md between the grants markers.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmbeddedDatabase } from './embedded.ts';
import { describeGrants, replaceGrantsBlock } from './grants.ts';
import { migrate } from './migrate.ts';
import { createPool } from './pool.ts';
import { bootstrapDatabase } from './roles.ts';

const README = join(dirname(fileURLToPath(import.meta.url)), '..', 'README.md');

const db = await startEmbeddedDatabase();
const pool = createPool({ connectionString: db.url, max: 2 });
try {
  await bootstrapDatabase(pool);
  await migrate(pool, { capability: 'ledger' });
  const list = await describeGrants(pool);
  writeFileSync(README, replaceGrantsBlock(readFileSync(README, 'utf8'), list));
  process.stdout.write(`${list}\n`);
} finally {
  await pool.end().catch(() => {});
  await db.close();
}
