/**
 * The embedded database of a data directory, for a command that works on it from outside the stack
 * (`ingest`, `explain`): a directory belongs to one process (retrieval/db/embedded.ts), so when a
 * running stack or server holds it, the command goes through that process's database (the lock
 * file names its loopback URL) and says so on stderr; a holder without a URL is refused by name;
 * otherwise the command opens the directory itself.
 */
import { DatabaseInUseError, type EmbeddedDatabase, readLock, startEmbeddedDatabase } from './db/embedded.ts';

export interface DataDirTarget {
  readonly url: string;
  /** Set when this command opened the directory itself (close it when done). */
  readonly embedded?: EmbeddedDatabase;
}

/** `verb`: how the command names what it does there ("writing", "reading"). */
export async function dataDirTarget(
  command: string,
  verb: 'writing' | 'reading',
  dataDir: string,
  stderr: (line: string) => void,
): Promise<DataDirTarget> {
  const holder = readLock(dataDir);
  if (holder?.url) {
    stderr(
      `${command}: ${dataDir} is open by PID ${holder.pid}; ${verb} through its database at ${new URL(holder.url).host}\n`,
    );
    return { url: holder.url };
  }
  if (holder) throw new DatabaseInUseError(dataDir, holder);
  const embedded = await startEmbeddedDatabase({ dataDir });
  return { url: embedded.url, embedded };
}
