/**
 * The retrieval.json file a command starts from (serve retrieval, ingest --config) and the embedder
 * its `embeddings` section names.
 */
import { readFileSync } from 'node:fs';
import { fsProblem } from '../common/fs-problem.ts';
import { parseStrictJson } from '../contract/index.ts';
import { describeProblems, type RetrievalConfig, readConfig as readConfigValue } from './config.ts';
import { createLocalEmbedder, LOCAL_PROFILE } from './embeddings/local.ts';
import { createOpenAIEmbedder } from './embeddings/openai.ts';
import type { Embedder } from './embeddings/types.ts';

export function embedderFor(config: RetrievalConfig['embeddings']): Embedder {
  if (config.profile === LOCAL_PROFILE) return createLocalEmbedder();
  // The loader guarantees both for every profile but the local one.
  if (config.url === undefined || config.model === undefined)
    throw new Error('embeddings: url and model are required for this profile');
  return createOpenAIEmbedder({
    url: config.url,
    model: config.model,
    profile: config.profile,
    ...(config.tokenFile !== undefined ? { tokenFile: config.tokenFile } : {}),
  });
}

/** A configuration file problem, naming the path tried (and whether it was the default). */
export class ConfigFileError extends Error {
  constructor(path: string, isDefault: boolean, problem: string) {
    super(`config ${path}${isDefault ? ' (the default; pass --config FILE)' : ''}: ${problem}`);
    this.name = 'ConfigFileError';
  }
}

/** Reads and validates retrieval.json; problems name the file and the field, never a value. */
export function readConfig(path: string, isDefault: boolean): RetrievalConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigFileError(path, isDefault, fsProblem(err));
  }
  const parsed = parseStrictJson(text, { maxDepth: 8, maxLength: 1 << 20 });
  if (!parsed.ok)
    throw new ConfigFileError(
      path,
      isDefault,
      parsed.error === 'duplicate_name' ? 'a member name appears twice' : `not valid JSON at offset ${parsed.offset}`,
    );
  const read = readConfigValue(parsed.value);
  if (!read.ok) throw new ConfigFileError(path, isDefault, describeProblems(read.problems));
  return read.value;
}
