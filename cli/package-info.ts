/**
 * The package.json of this package, found from the module's own location: the source checkout has it
 * next to `cli/`, the compiled build (`dist/cli/main.js`, the image's `/app/dist`) two levels up. The
 * search walks up from this module's folder and takes the first package.json named
 * `fgentic-retrieval`, so either layout reads the same file.
 */
import { readFileSync } from 'node:fs';

const NAME = 'fgentic-retrieval';

export interface PackageInfo {
  readonly name: string;
  readonly version: string;
  readonly devDependencies?: Readonly<Record<string, string>>;
}

/** The package's package.json, or undefined when no ancestor folder holds it (a bare copy of dist/). */
export function packageInfo(from: URL = new URL('.', import.meta.url)): PackageInfo | undefined {
  for (let dir = from; ; ) {
    try {
      const pkg = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as Partial<PackageInfo>;
      if (pkg.name === NAME && typeof pkg.version === 'string') return pkg as PackageInfo;
    } catch {
      // Not here (absent or unreadable): look one level up.
    }
    const up = new URL('..', dir);
    if (up.href === dir.href) return undefined;
    dir = up;
  }
}
