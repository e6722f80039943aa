/**
 * RetrievalAgent rules. Its namespace and name are the kagent Agent's and appear in the route paths
 * (`/api/a2a/<ns>/<name>`), the MCP key's workload and both servers' agent lists, which accept only
 * DNS-1123 labels; its spec reaches the rendered kagent Agent and the MCP route's rate limit. One
 * module for the CRD, the webhook and the render. Pure.
 */
import { isObject as isObj } from '../common/json-read.ts';
import { DNS1123_LABEL, isDns1123Label } from '../contract/index.ts';
import { charLength, checkSecretKeyRef, checkSubdomain } from './kube.ts';
import { celString } from './names.ts';
import { at, type Problem, problem } from './result.ts';

export const SYSTEM_MESSAGE_MAX = 65_536;
export const DESCRIPTION_MAX = 1024;
export const RATE_LIMIT = { min: 1, max: 10_000, default: 60 } as const;
export const SKILLS = {
  max: 32,
  idPattern: '^[A-Za-z0-9._-]{1,64}$',
  nameMax: 128,
  descriptionMax: 1024,
  tagsMax: 16,
  tagMax: 64,
} as const;
const SKILL_ID = new RegExp(SKILLS.idPattern);

/** The CRD's rule on a RetrievalAgent's name, from the same source as `isDns1123Label`. */
export const AGENT_NAME_CEL = {
  rule: `self.metadata.name.matches(${celString(DNS1123_LABEL.source)})`,
  message: 'metadata.name is the kagent Agent name and part of its routes: a DNS-1123 label',
} as const;

function text(v: unknown, path: string, min: number, max: number): Problem[] {
  if (v === undefined && min === 0) return [];
  return typeof v === 'string' && charLength(v) >= min && charLength(v) <= max
    ? []
    : [problem('agent-text', path, `must be a string of ${min}-${max} characters`)];
}

function checkSkills(v: unknown, path: string): Problem[] {
  if (v === undefined) return [];
  if (!Array.isArray(v) || v.length > SKILLS.max)
    return [problem('skills', path, `must list at most ${SKILLS.max} skills`)];
  const out: Problem[] = [];
  const ids = new Set<unknown>();
  v.forEach((s: unknown, i) => {
    const p = `${path}[${i}]`;
    if (!isObj(s)) {
      out.push(problem('skills', p, 'must be an object with id and name'));
      return;
    }
    if (typeof s['id'] !== 'string' || !SKILL_ID.test(s['id']))
      out.push(problem('skills', at(p, 'id'), `must match ${SKILLS.idPattern}`));
    else if (ids.has(s['id'])) out.push(problem('skills', at(p, 'id'), 'duplicate skill id'));
    ids.add(s['id']);
    if (typeof s['name'] !== 'string' || charLength(s['name']) < 1 || charLength(s['name']) > SKILLS.nameMax)
      out.push(problem('skills', at(p, 'name'), `must be 1-${SKILLS.nameMax} characters`));
    if (
      s['description'] !== undefined &&
      (typeof s['description'] !== 'string' || charLength(s['description']) > SKILLS.descriptionMax)
    )
      out.push(problem('skills', at(p, 'description'), `must be at most ${SKILLS.descriptionMax} characters`));
    const tags = s['tags'];
    if (tags === undefined) return;
    const ok =
      Array.isArray(tags) &&
      tags.length <= SKILLS.tagsMax &&
      new Set(tags).size === tags.length &&
      tags.every((t) => typeof t === 'string' && charLength(t) >= 1 && charLength(t) <= SKILLS.tagMax);
    if (!ok)
      out.push(problem('skills', at(p, 'tags'), `must be at most ${SKILLS.tagsMax} unique tags of 1-${SKILLS.tagMax}`));
  });
  return out;
}

/** A RetrievalAgent's `metadata.namespace`/`name` and spec, every rule the CRD carries and more. */
export function checkAgent(a: { metadata?: { namespace?: unknown; name?: unknown }; spec?: unknown }): Problem[] {
  const out: Problem[] = [];
  if (!isDns1123Label(a.metadata?.name)) out.push(problem('agent-name', 'metadata.name', AGENT_NAME_CEL.message));
  if (!isDns1123Label(a.metadata?.namespace))
    out.push(problem('agent-name', 'metadata.namespace', 'must be a DNS-1123 label'));
  const s = a.spec;
  if (!isObj(s)) return [...out, problem('required', 'spec', 'required')];
  if (s['modelConfig'] === undefined) out.push(problem('required', 'spec.modelConfig', 'required'));
  else out.push(...checkSubdomain(s['modelConfig'], 'spec.modelConfig'));
  out.push(...text(s['systemMessage'], 'spec.systemMessage', 1, SYSTEM_MESSAGE_MAX));
  out.push(...text(s['description'], 'spec.description', 0, DESCRIPTION_MAX));
  out.push(...checkSkills(s['skills'], 'spec.skills'));
  if (s['mcpApiKeySecretRef'] === undefined) out.push(problem('required', 'spec.mcpApiKeySecretRef', 'required'));
  else out.push(...checkSecretKeyRef(s['mcpApiKeySecretRef'], 'spec.mcpApiKeySecretRef'));
  const rl = s['rateLimit'];
  const rpm = isObj(rl) ? rl['requestsPerMinute'] : rl === undefined ? undefined : null;
  if (
    rpm !== undefined &&
    !(typeof rpm === 'number' && Number.isInteger(rpm) && rpm >= RATE_LIMIT.min && rpm <= RATE_LIMIT.max)
  )
    out.push(
      problem(
        'rate-limit',
        'spec.rateLimit.requestsPerMinute',
        `must be an integer ${RATE_LIMIT.min}-${RATE_LIMIT.max}`,
      ),
    );
  if (s['public'] !== undefined && typeof s['public'] !== 'boolean')
    out.push(problem('schema', 'spec.public', 'must be a boolean'));
  return out;
}
