/**
 * Flag parsing shared by every command, so that each answers a bad command line the same way: the
 * offending flag named on stderr, the command's usage line, exit 2 (kubectl's convention for usage
 * errors). Values are never echoed: a mistyped flag may carry a secret.
 */
import { type ParseArgsConfig, parseArgs } from 'node:util';

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

type Options = NonNullable<ParseArgsConfig['options']>;

export interface Parsed {
  readonly values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  readonly positionals: string[];
}

/** node:util parseArgs, with its errors turned into a UsageError that names the flag only. */
export function parseFlags(argv: string[], options: Options, allowPositionals = false): Parsed {
  try {
    const { values, positionals } = parseArgs({ args: argv, options, allowPositionals, strict: true });
    return { values, positionals };
  } catch (err) {
    const e = err as { code?: string; message?: string };
    const flag = /'(-{1,2}[^' <=]+)/.exec(e.message ?? '')?.[1];
    switch (e.code) {
      case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
        throw new UsageError(`unknown flag ${flag ?? ''}`.trim());
      case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
        throw new UsageError(
          /does not take an argument/.test(e.message ?? '')
            ? `flag ${flag ?? ''} takes no value`
            : `flag ${flag ?? ''} needs a value`,
        );
      case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
        throw new UsageError('unexpected argument (this command takes flags only)');
      default:
        throw new UsageError('invalid arguments');
    }
  }
}

/** Writes `<command>: <problem>` and the usage line to stderr; returns the usage exit code. */
export function usageError(command: string, usage: string, err: unknown): number {
  const msg = err instanceof UsageError ? err.message : 'invalid arguments';
  process.stderr.write(`${command}: ${msg}\nusage: ${usage}\nRun 'fgentic-retrieval help ${command}' for details.\n`);
  return 2;
}
