/** A small progress bar on stderr (redrawn in place on a TTY, one line per phase otherwise). */
export interface Progress {
  start(label: string, total: number): void;
  update(done: number): void;
  done(): void;
}

export function createProgress(stream: NodeJS.WriteStream = process.stderr): Progress {
  let label = '';
  let total = 0;
  let last = -1;
  const draw = (n: number) => {
    if (!stream.isTTY) return;
    const width = 30;
    const frac = total === 0 ? 1 : Math.min(1, n / total);
    const filled = Math.round(frac * width);
    stream.write(`\r${label.padEnd(10)} [${'#'.repeat(filled)}${' '.repeat(width - filled)}] ${n}/${total}`);
  };
  return {
    start(l, t) {
      label = l;
      total = t;
      last = -1;
      draw(0);
    },
    update(n) {
      if (n === last) return;
      last = n;
      draw(n);
    },
    done() {
      if (stream.isTTY) {
        draw(total);
        stream.write('\n');
      } else stream.write(`${label}: ${total}/${total}\n`);
    },
  };
}
