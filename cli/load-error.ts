/**
 * Why `start` could not load the local stack. Only a missing module that a source checkout with dev
 * dependencies would have means "install them": the stack module itself (the image and `--omit=dev`
 * builds leave out local/) or a package listed under devDependencies. Anything else — a syntax error,
 * a module that throws while loading, a missing relative import, a missing production dependency —
 * is a real fault and is shown as one, so it is not misread as an installation step.
 */
import { packageInfo } from './package-info.ts';

export interface LoadFailure {
  readonly exitCode: number;
  readonly message: string;
}

export const NEEDS_DEV_DEPENDENCIES =
  'start: the local stack needs a source checkout with dev dependencies (npm install)';

/** `@scope/name/sub` → `@scope/name`; `name/sub` → `name`. */
function packageRoot(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? specifier);
}

export function startLoadFailure(err: unknown, devDependencies: readonly string[]): LoadFailure {
  const e = (err ?? {}) as { code?: unknown; url?: unknown; message?: unknown; name?: unknown };
  if (e.code === 'ERR_MODULE_NOT_FOUND') {
    // Node sets `url` when a module file is missing and names the package when a package is missing.
    if (typeof e.url === 'string' && /\/local\/start\.[jt]s$/.test(e.url))
      return { exitCode: 2, message: NEEDS_DEV_DEPENDENCIES };
    const pkg = typeof e.message === 'string' ? /^Cannot find package '([^']+)'/.exec(e.message)?.[1] : undefined;
    if (pkg !== undefined && devDependencies.includes(packageRoot(pkg)))
      return { exitCode: 2, message: NEEDS_DEV_DEPENDENCIES };
  }
  const detail = err instanceof Error ? (err.stack ?? `${err.name}: ${err.message}`) : String(err);
  return { exitCode: 1, message: `start: the local stack failed to load: ${detail}` };
}

/**
 * The devDependencies of the package.json beside the CLI. Without a readable one (a bare copy of the
 * build output) nothing counts as a dev dependency, so a load failure is shown as the fault it is.
 */
export function devDependencies(): string[] {
  return Object.keys(packageInfo()?.devDependencies ?? {});
}
