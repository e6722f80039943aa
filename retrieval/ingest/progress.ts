/**
 * Ingest progress on stderr: on a terminal a bar redrawn in place; otherwise (CI, Kubernetes Jobs,
 * redirected output) a plain line at most every `intervalMs` and one at the end of each phase, so a
 * log collector gets readable lines and no carriage returns.
 */
export interface Progress {
  start(label: string, total: number): void;
  update(done: number): void;
  done(): void;
}

export interface ProgressOptions {
  /** Overrides the stream's isTTY. */
  readonly tty?: boolean;
  /** Minimum time between plain lines (default 2 s). */
  readonly intervalMs?: number;
  readonly now?: () => number;
}

export function createProgress(
  stream: Pick<NodeJS.WriteStream, 'write' | 'isTTY'> = process.stderr,
  options: ProgressOptions = {},
): Progress {
  const tty = options.tty ?? stream.isTTY === true;
  const interval = options.intervalMs ?? 2000;
  const now = options.now ?? Date.now;
  let label = '';
  let total = 0;
  let last = -1;
  let lastLine = 0;
  let began = 0;
  const rate = (n: number) => {
    const s = (now() - began) / 1000;
    return s > 0 ? `, ${Math.round(n / s)}/s` : '';
  };
  const bar = (n: number) => {
    const width = 30;
    const frac = total === 0 ? 1 : Math.min(1, n / total);
    const filled = Math.round(frac * width);
    stream.write(
      `\r${label.padEnd(10)} [${'#'.repeat(filled)}${' '.repeat(width - filled)}] ${n}/${total}${rate(n)}\x1b[K`,
    );
  };
  const line = (n: number) => {
    const pct = total === 0 ? 100 : Math.floor((100 * n) / total);
    stream.write(`${label}: ${n}/${total} (${pct}%${rate(n)})\n`);
  };
  return {
    start(l, t) {
      label = l;
      total = t;
      last = -1;
      began = now();
      lastLine = began;
      if (tty) bar(0);
    },
    update(n) {
      if (n === last) return;
      last = n;
      if (tty) bar(n);
      else if (now() - lastLine >= interval && n < total) {
        lastLine = now();
        line(n);
      }
    },
    done() {
      if (tty) {
        bar(total);
        stream.write('\n');
      } else line(total);
    },
  };
}
