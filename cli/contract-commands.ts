/** `projection decode` and `snapshot digest`: the contract on stdin/stdout, for scripts and other languages. */

import { parseFlags, usageError } from '../common/args.ts';
import type { AgentRef } from '../contract/index.ts';
import { decodeProjection, jcs, parseStrictJson, stateDigest, validateSnapshot } from '../contract/index.ts';
import { readStdin } from './io.ts';

export async function projectionDecode(args: { now?: string; agent?: string }): Promise<number> {
  const now = args.now === undefined ? Math.floor(Date.now() / 1000) : Number(args.now);
  if (!Number.isSafeInteger(now)) {
    process.stderr.write('error: --now must be integer Unix seconds\n');
    return 2;
  }
  let agents: readonly AgentRef[] | 'any' = 'any';
  if (args.agent !== undefined) {
    const [namespace, name, ...rest] = args.agent.split('/');
    if (!namespace || !name || rest.length > 0) {
      process.stderr.write('error: --agent must be NAMESPACE/NAME\n');
      return 2;
    }
    agents = [{ namespace, name }];
  }
  const input = (await readStdin()).replace(/\r?\n$/, '');
  const verdict = decodeProjection(input, { now, agents });
  if (!verdict.ok) {
    process.stderr.write(`denied: ${verdict.reason}\n`);
    return 1;
  }
  process.stdout.write(`${jcs(verdict.value)}\n`);
  return 0;
}

export async function snapshotDigest(): Promise<number> {
  const parsed = parseStrictJson(await readStdin());
  if (!parsed.ok) {
    process.stderr.write(`denied: ${parsed.error}\n`);
    return 1;
  }
  const snapshot = validateSnapshot(parsed.value);
  if (!snapshot.ok) {
    process.stderr.write(`denied: ${snapshot.reason}${snapshot.path ? ` at ${snapshot.path}` : ''}\n`);
    return 1;
  }
  process.stdout.write(`${stateDigest(snapshot.value)}\n`);
  return 0;
}

export async function projectionDecodeCommand(argv: string[]): Promise<number> {
  let values: { now?: string; agent?: string };
  try {
    values = parseFlags(argv, { now: { type: 'string' }, agent: { type: 'string' } }).values as typeof values;
  } catch (err) {
    return usageError('projection decode', 'fgentic-retrieval projection decode [--now UNIX] [--agent NS/NAME]', err);
  }
  return projectionDecode({
    ...(values.now !== undefined ? { now: values.now } : {}),
    ...(values.agent !== undefined ? { agent: values.agent } : {}),
  });
}

export async function snapshotDigestCommand(argv: string[]): Promise<number> {
  try {
    parseFlags(argv, {});
  } catch (err) {
    return usageError('snapshot digest', 'fgentic-retrieval snapshot digest < snapshot.json', err);
  }
  return snapshotDigest();
}
