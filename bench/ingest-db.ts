/**
 * The embedded database of bench/ingest.ts, in its own process as `npm start` runs it: PGlite with
 * pgvector on a loopback port, persisted to the directory given as the first argument. Prints one
 * JSON line `{"url": …}` once it listens; closes the database (writing it back) on SIGTERM or when
 * stdin ends, so the parent's exit never leaves it behind.
 */
import { startEmbeddedDatabase } from '../retrieval/db/embedded.ts';

const dataDir = process.argv[2];
if (dataDir === undefined) {
  process.stderr.write('usage: ingest-db.ts DATA_DIR\n');
  process.exit(2);
}
const db = await startEmbeddedDatabase({ dataDir });
process.stdout.write(`${JSON.stringify({ url: db.url })}\n`);
let closing = false;
const close = () => {
  if (closing) return;
  closing = true;
  db.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on('SIGTERM', close);
process.stdin.on('end', close);
process.stdin.resume();
