/**
 * What went wrong with a path, as the tail of a CLI message (`<flag or role> <path>: <problem>`):
 * the error code in words, never the file's content. One table for every command, so `render`,
 * `admission check`, `serve …` and the kubeconfig lookup say the same thing for the same fault.
 */
export function fsProblem(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  switch (code) {
    case 'ENOENT':
      return 'does not exist';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'EISDIR':
      return 'is a directory, not a file';
    case 'ENOTDIR':
      return 'a parent is not a directory';
    case 'EMFILE':
    case 'ENFILE':
      return 'too many open files';
    default:
      return code === undefined ? 'cannot be read' : `cannot be read (${code})`;
  }
}

/** The path a filesystem error names, when it names one. */
export function fsErrorPath(err: unknown): string | undefined {
  const path = (err as NodeJS.ErrnoException | undefined)?.path;
  return typeof path === 'string' ? path : undefined;
}
