/**
 * `npm run soak [-- --duration 10m] [--concurrency N] [--rate OPS_PER_S] [--seed N]`: runs the soak
 * against a fresh local stack (loopback only), prints the per-fault table and writes
 * bench/results/soak.json. Exit 1 when the oracle saw a wrong allow or a leaked row, or the parent's
 * heap grew beyond the stated bound; 2 for invalid arguments.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { formatReport, runSoak } from './run.ts';

/** "600", "600s", "10m", "1h" → milliseconds; undefined when malformed or outside 10 s – 24 h. */
export function parseDuration(text: string): number | undefined {
  const m = /^(\d+)(s|m|h)?$/.exec(text.trim());
  if (!m) return undefined;
  const ms = Number(m[1]) * (m[2] === 'h' ? 3_600_000 : m[2] === 'm' ? 60_000 : 1000);
  return ms >= 10_000 && ms <= 86_400_000 ? ms : undefined;
}

function positiveInt(text: string | undefined, fallback: number, max: number): number | undefined {
  if (text === undefined) return fallback;
  const n = Number(text);
  return Number.isInteger(n) && n >= 1 && n <= max ? n : undefined;
}

export async function main(argv: string[]): Promise<number> {
  let values: Record<string, string | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        duration: { type: 'string' },
        concurrency: { type: 'string' },
        rate: { type: 'string' },
        seed: { type: 'string' },
      },
      strict: true,
    }));
  } catch (e) {
    process.stderr.write(`soak: ${(e as Error).message}\n`);
    return 2;
  }
  const durationMs = parseDuration(values['duration'] ?? '10m');
  const concurrency = positiveInt(values['concurrency'], 4, 64);
  const rate = positiveInt(values['rate'], 3, 100);
  const seed = positiveInt(values['seed'], 11, 2 ** 31);
  if (durationMs === undefined || concurrency === undefined || rate === undefined || seed === undefined) {
    process.stderr.write(
      'soak: --duration is 10s–24h (e.g. 600, 90s, 10m); --concurrency 1–64, --rate 1–100, --seed ≥ 1\n',
    );
    return 2;
  }
  const report = await runSoak({
    durationMs,
    concurrency,
    ratePerSec: rate,
    seed,
    progress: (line) => process.stderr.write(`[soak ${new Date().toISOString().slice(11, 19)}] ${line}\n`),
  });
  process.stdout.write(`${formatReport(report)}\n`);
  const dir = fileURLToPath(new URL('../../bench/results/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    `${dir}soak.json`,
    `${JSON.stringify({ options: { durationMs, concurrency, rate, seed }, ...report }, null, 2)}\n`,
  );
  process.stderr.write('wrote bench/results/soak.json\n');
  const failed =
    report.wrongAllows > 0 || report.leakedRows > 0 || report.heapGrowthBytes > report.heapGrowthBoundBytes;
  return failed ? 1 : 0;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e: unknown) => {
      process.stderr.write(`soak: ${(e as Error).message}\n`);
      process.exit(1);
    },
  );
}
