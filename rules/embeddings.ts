/**
 * The query embeddings settings (`RetrievalPlatform.spec.embeddings` → `retrieval.json`): one rule
 * for the CRD, the webhook, the render and the retrieval server's loader.
 *
 * - `profile` names the vector space and is recorded in the database (docs/decisions.md#d7): 1-64
 *   characters of lowercase letters, digits, dots and hyphens, starting and ending with a letter or
 *   digit. The local profile is the embedded stack's deterministic test embedder: a cluster's
 *   RetrievalPlatform may not name it (the rendered file always carries an endpoint).
 * - `model` is sent to the endpoint: 1-255 printable ASCII characters, no space at either end.
 * - `url`: rules/urls.ts.
 * Pure.
 */
import { checkSecretKeyRef } from './kube.ts';
import { at, type Problem, problem } from './result.ts';
import { checkHttpUrl } from './urls.ts';

export const PROFILE_MAX = 64;
export const PROFILE_PATTERN = '^[a-z0-9](?:[a-z0-9.-]{0,62}[a-z0-9])?$';
const PROFILE = new RegExp(PROFILE_PATTERN);
/** The deterministic local embedder of the embedded stack (retrieval/embeddings/local.ts). */
export const LOCAL_PROFILE = 'local-hash-1024-v1';

export const MODEL_MAX = 255;
export const MODEL_PATTERN = '^[\\x21-\\x7e](?:[\\x20-\\x7e]*[\\x21-\\x7e])?$';
const MODEL = new RegExp(MODEL_PATTERN);

export function isProfile(v: unknown): v is string {
  return typeof v === 'string' && PROFILE.test(v);
}

export function isModel(v: unknown): v is string {
  return typeof v === 'string' && v.length <= MODEL_MAX && MODEL.test(v);
}

export const PROFILE_SCHEMA = { pattern: PROFILE_PATTERN, maxLength: PROFILE_MAX } as const;
export const PROFILE_CEL = {
  rule: `self != '${LOCAL_PROFILE}'`,
  message: `${LOCAL_PROFILE} is the embedded stack's test embedder`,
} as const;
export const MODEL_SCHEMA = { pattern: MODEL_PATTERN, maxLength: MODEL_MAX } as const;

export function checkProfile(v: unknown, path: string): Problem[] {
  return isProfile(v)
    ? []
    : [
        problem(
          'embeddings-profile',
          path,
          `must be 1-${PROFILE_MAX} of [a-z0-9.-], starting and ending with a letter or digit`,
        ),
      ];
}

export function checkModel(v: unknown, path: string): Problem[] {
  return isModel(v)
    ? []
    : [
        problem(
          'embeddings-model',
          path,
          `must be 1-${MODEL_MAX} printable ASCII characters without a space at either end`,
        ),
      ];
}

/** `spec.embeddings` of a RetrievalPlatform. */
export function checkEmbeddings(v: unknown, path: string): Problem[] {
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    return [problem('required', path, 'must be an object with url, model and profile')];
  const e = v as Record<string, unknown>;
  const out: Problem[] = [];
  for (const k of Object.keys(e))
    if (!['url', 'model', 'profile', 'tokenSecretRef'].includes(k))
      out.push(problem('schema', at(path, k), 'unknown field'));
  if (e['url'] === undefined) out.push(problem('required', at(path, 'url'), 'required'));
  out.push(...checkHttpUrl(e['url'], at(path, 'url')));
  out.push(...checkModel(e['model'], at(path, 'model')));
  out.push(...checkProfile(e['profile'], at(path, 'profile')));
  if (e['profile'] === LOCAL_PROFILE) out.push(problem('embeddings-profile', at(path, 'profile'), PROFILE_CEL.message));
  if (e['tokenSecretRef'] !== undefined)
    out.push(...checkSecretKeyRef(e['tokenSecretRef'], at(path, 'tokenSecretRef')));
  return out;
}
