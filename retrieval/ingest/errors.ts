/**
 * What an ingest can fail on, each with a message that says what failed and where, never what the
 * input contained: record numbers, field paths, file paths the operator typed, host:port. Chunk text,
 * principals and group names stay out, because a corpus may be confidential and CI logs are not.
 */

/** Invalid input: `record N: <path>: <rule>` for a record, or a plain statement about a file. */
export class IngestError extends Error {
  constructor(
    /** 1-based record (line) number; 0 when the problem is not one record's. */
    readonly line: number,
    readonly reason: string,
  ) {
    super(line > 0 ? `record ${line}: ${reason}` : reason);
    this.name = 'IngestError';
  }
}

/** The database could not be reached or refused the session. */
export class DatabaseUnreachableError extends Error {
  constructor(readonly detail: string) {
    super(detail);
    this.name = 'DatabaseUnreachableError';
  }
}

/** A filesystem error on an input path, as a sentence naming the path and the cause. */
export function fileProblem(what: 'file' | 'directory', path: string, err: unknown): IngestError {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const cause =
    code === 'ENOENT'
      ? 'does not exist'
      : code === 'EACCES' || code === 'EPERM'
        ? 'permission denied'
        : code === 'EISDIR'
          ? 'is a directory, not a file'
          : code === 'ENOTDIR'
            ? 'is not a directory'
            : code === 'EMFILE' || code === 'ENFILE'
              ? 'too many open files'
              : `cannot be read (${code ?? 'unknown error'})`;
  return new IngestError(0, `${what} ${path}: ${cause}`);
}

const RULES: Record<string, string> = {
  principal: 'not a full MXID (@localpart:server)',
  network: 'network must be a DNS-1123 label, present only for bridged_matrix',
  kind: 'kind must be matrix or bridged_matrix',
  unknown_field: 'unknown field',
  classifications: 'not a classification (public, approved_non_public, restricted, regulated, secret, authentication)',
  groups: 'not a partner group partner/<policy>/<group>, or listed twice',
};

/**
 * A metadata verdict (reason code and path from contract/metadata.ts) as `<path>: <rule>`; the path
 * is relative to the record (`metadata.allowed_principals[3].principal`).
 */
export function describeMetadataDenial(reason: string, path: string | undefined, prefix: string): string {
  const p = !path || path === '$' ? prefix : `${prefix}.${path.replace(/^\$\./, '')}`;
  if (RULES[reason]) return `${p}: ${RULES[reason]}`;
  if (/allowed_principals$/.test(p))
    return `${p}: must be an array of at most 64 principals; a chunk needs at least one principal or group`;
  if (/allowed_groups$/.test(p)) return `${p}: must be an array of at most 64 partner groups`;
  if (/allowed_principals\[\d+\]$/.test(p)) return `${p}: must be a principal object, listed once`;
  if (/source\.[a-z]+$/.test(p) && !p.endsWith('source.id')) return `${p}: must be clean text within its size limit`;
  if (p.endsWith('source.id')) return `${p}: required clean text of at most 512 bytes`;
  return `${p}: missing or invalid`;
}

/**
 * The cause of a failure to reach Postgres, from `pg`'s socket or server errors, as a
 * DatabaseUnreachableError; undefined when the error is something else.
 */
export function databaseProblem(err: unknown, url: string | undefined): DatabaseUnreachableError | undefined {
  const e = err as (NodeJS.ErrnoException & { address?: string; port?: number }) | undefined;
  if (!e || typeof e !== 'object') return undefined;
  let where = '';
  try {
    const u = new URL(url ?? '');
    where = `${u.hostname}:${u.port || '5432'}`;
  } catch {}
  if (e.address !== undefined && e.port !== undefined) where = `${e.address}:${e.port}`;
  const at = where ? ` at ${where}` : '';
  switch (e.code) {
    case 'ECONNREFUSED':
      return new DatabaseUnreachableError(`database: connection refused${at}`);
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new DatabaseUnreachableError(`database: host not found${at}`);
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return new DatabaseUnreachableError(`database: unreachable${at} (${e.code})`);
    case 'ECONNRESET':
      return new DatabaseUnreachableError(`database: connection reset${at}`);
    case '28P01':
    case '28000':
      return new DatabaseUnreachableError(`database: authentication failed${at}`);
    case '3D000':
      return new DatabaseUnreachableError(`database: database does not exist${at}`);
    default:
      if (e.message === 'timeout expired' || /Connection terminated/.test(e.message ?? ''))
        return new DatabaseUnreachableError(`database: connection timed out or closed${at}`);
      return undefined;
  }
}
