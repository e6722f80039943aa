/**
 * Validates custom resources against their CRDs the way kube-apiserver does on create and update, with
 * no I/O (the CRDs come in as objects): OpenAPI defaults, then the structural schema with unknown
 * fields rejected (what `kubectl apply`'s default strict field validation reports; ajv, with
 * `additionalProperties: false` wherever the schema does not preserve unknown fields), then every
 * `x-kubernetes-validations` CEL rule at its node (@bufbuild/cel with the Kubernetes `matches` global).
 * Transition rules (`oldSelf`) are skipped: nothing here has the old object. Rules that need
 * Kubernetes-only CEL libraries (quantity, ip, url, …) are reported as unevaluated; `crValidator`
 * treats those as failures, so our own resources never pass on a rule nobody evaluated.
 * Used by the API-server double, by `fgentic-retrieval admission check`, and by the schema tests of
 * rendered upstream objects.
 */
import { CelScalar, celEnv, celFunc, isCelError, parse, plan } from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';
import { Ajv, type ValidateFunction } from 'ajv';

export type Schema = Record<string, unknown> & {
  properties?: Record<string, Schema>;
  items?: Schema;
  additionalProperties?: Schema | boolean;
  'x-kubernetes-validations'?: { rule: string; message?: string }[];
};

export function toJsonSchema(s: unknown, root = false): unknown {
  if (Array.isArray(s)) return s.map((x) => toJsonSchema(x));
  if (!s || typeof s !== 'object') return s;
  const src = s as Schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(src)) {
    if (['description', 'default', 'format', 'nullable'].includes(k) || k.startsWith('x-kubernetes-')) continue;
    if (k === 'properties')
      out[k] = Object.fromEntries(
        Object.entries(v as Record<string, unknown>).map(([pk, pv]) => [
          pk,
          // ObjectMeta in a CRD schema is a bare `type: object`; the apiserver validates it itself.
          root && pk === 'metadata' ? { type: 'object' } : toJsonSchema(pv),
        ]),
      );
    else if (k === 'items' || k === 'additionalProperties' || k === 'not')
      out[k] = typeof v === 'object' ? toJsonSchema(v) : v;
    else if (k === 'allOf' || k === 'anyOf' || k === 'oneOf') out[k] = (v as unknown[]).map((x) => toJsonSchema(x));
    else out[k] = v;
  }
  if (src['x-kubernetes-int-or-string']) {
    delete out['type'];
    out['anyOf'] = [{ type: 'integer' }, { type: 'string' }];
  }
  if (src['nullable'] && out['type']) out['type'] = [out['type'], 'null'];
  // The apiserver refuses a repeated item of a `set` list ("Duplicate value"; apiextensions-apiserver
  // validates list types after the schema, structurallisttype.ValidateListSetsAndMaps).
  if (src['x-kubernetes-list-type'] === 'set') out['uniqueItems'] = true;
  const preserve = src['x-kubernetes-preserve-unknown-fields'] === true;
  if (out['type'] === 'object' && out['additionalProperties'] === undefined && !preserve) {
    out['additionalProperties'] = false;
    out['properties'] ??= {};
  }
  return out;
}

function applyDefaults(s: Schema | undefined, v: unknown): unknown {
  if (!s || v === undefined || v === null) return v;
  if ((s['type'] === 'object' || s.properties) && typeof v === 'object' && !Array.isArray(v)) {
    const o = v as Record<string, unknown>;
    for (const [pk, ps] of Object.entries(s.properties ?? {})) {
      if (o[pk] === undefined && ps['default'] !== undefined) o[pk] = structuredClone(ps['default']);
      if (o[pk] !== undefined) o[pk] = applyDefaults(ps, o[pk]);
    }
    if (s.additionalProperties && typeof s.additionalProperties === 'object')
      for (const k of Object.keys(o))
        if (!s.properties?.[k]) o[k] = applyDefaults(s.additionalProperties as Schema, o[k]);
  } else if (s['type'] === 'array' && Array.isArray(v) && s.items) return v.map((x) => applyDefaults(s.items, x));
  return v;
}

function toCel(s: Schema | undefined, v: unknown): unknown {
  if (v === null || v === undefined) return v;
  if (typeof v === 'number') {
    if (s?.['type'] === 'integer' || s?.['x-kubernetes-int-or-string'] || (!s && Number.isInteger(v))) return BigInt(v);
    return v;
  }
  if (Array.isArray(v)) return v.map((x) => toCel(s?.items, x));
  if (typeof v === 'object') {
    const out = new Map<string, unknown>();
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      const ps =
        s?.properties?.[k] ?? (typeof s?.additionalProperties === 'object' ? s.additionalProperties : undefined);
      out.set(k, toCel(ps, x));
    }
    return out;
  }
  return v;
}

const { STRING, BOOL } = CelScalar;
const k8sEnv = celEnv({
  funcs: [
    ...strings,
    // Kubernetes CEL also has the global form matches(s, re).
    celFunc('matches', [STRING, STRING], BOOL, (s: string, re: string) => new RegExp(re).test(s)),
  ],
});
const K8S_ONLY =
  /\b(quantity|isQuantity|ip|isIP|cidr|isCIDR|url|isURL|semver|isSemver|authorizer)\s*\(|\bformat\.|\.(getScheme|getHost|getHostname|getPort|getEscapedPath|getQuery|compareTo|isGreaterThan|isLessThan|asInteger|asApproximateFloat|family|isLoopback|containsIP|containsCIDR|prefixLength|masked)\(/;

export interface CelReport {
  passed: number;
  failed: string[];
  unevaluated: string[];
  skipped: number;
}

function walkCel(s: Schema | undefined, v: unknown, at: string, r: CelReport): void {
  if (!s || v === undefined || v === null) return;
  for (const rule of s['x-kubernetes-validations'] ?? []) {
    if (/\boldSelf\b/.test(rule.rule)) {
      r.skipped++;
      continue;
    }
    let res: unknown;
    try {
      res = plan(k8sEnv, parse(rule.rule))({ self: toCel(s, v) } as never);
    } catch (e) {
      res = e;
    }
    if (res === true) r.passed++;
    else if ((isCelError(res) || res instanceof Error) && K8S_ONLY.test(rule.rule))
      r.unevaluated.push(`${at}: ${rule.rule.slice(0, 100)}`);
    else
      r.failed.push(
        `${at}: ${rule.message ?? rule.rule}${isCelError(res) || res instanceof Error ? ` [error: ${(res as Error).message}]` : ''}`,
      );
  }
  if (typeof v === 'object' && !Array.isArray(v)) {
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      const ps = s.properties?.[k] ?? (typeof s.additionalProperties === 'object' ? s.additionalProperties : undefined);
      walkCel(ps, x, `${at}.${k}`, r);
    }
  } else if (Array.isArray(v)) {
    for (const [i, x] of v.entries()) walkCel(s.items, x, `${at}[${i}]`, r);
  }
}

export interface ValidationResult {
  key: string;
  ok: boolean;
  schemaErrors: string[];
  cel: CelReport;
}

export class CrdValidator {
  private schemas = new Map<string, Schema>();
  private compiled = new Map<string, ValidateFunction>();
  private ajv = new Ajv({ allErrors: true, strict: false, validateFormats: false });

  addCrd(crd: Record<string, unknown>): void {
    const spec = crd['spec'] as {
      group: string;
      names: { kind: string };
      versions: { name: string; served: boolean; schema: { openAPIV3Schema: Schema } }[];
    };
    for (const v of spec.versions)
      if (v.served) this.schemas.set(`${spec.group}/${v.name}|${spec.names.kind}`, v.schema.openAPIV3Schema);
  }

  has(apiVersion: string, kind: string): boolean {
    return this.schemas.has(`${apiVersion}|${kind}`);
  }

  validate(obj: Record<string, unknown>): ValidationResult {
    const key = `${obj['apiVersion']}|${obj['kind']}`;
    const s = this.schemas.get(key);
    if (!s) throw new Error(`no schema for ${key}`);
    const defaulted = applyDefaults(s, structuredClone(obj)) as Record<string, unknown>;
    if (!this.compiled.has(key)) this.compiled.set(key, this.ajv.compile(toJsonSchema(s, true) as object));
    const validate = this.compiled.get(key) as ValidateFunction;
    const ok = validate(defaulted);
    const cel: CelReport = { passed: 0, failed: [], unevaluated: [], skipped: 0 };
    walkCel(s, defaulted, 'self', cel);
    const schemaErrors = ok
      ? []
      : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message} ${JSON.stringify(e.params)}`);
    return { key, ok: ok && cel.failed.length === 0, schemaErrors, cel };
  }
}

export interface CrIssue {
  path: string;
  message: string;
}

/**
 * A validator of our own kinds against the CRDs in `crds` (fail closed: a rule that cannot be evaluated
 * is an error, and an apiVersion/kind without a served CRD version is an error).
 */
export function crValidator(crds: Record<string, unknown>[]) {
  const v = new CrdValidator();
  for (const c of crds) v.addCrd(c);
  return {
    has: (apiVersion: string, kind: string) => v.has(apiVersion, kind),
    /** Problems in apiserver order (schema first, then CEL); empty when the object is valid. */
    validate(obj: Record<string, unknown>): string[] {
      if (!v.has(String(obj['apiVersion']), String(obj['kind'])))
        return [`no served CRD version for ${String(obj['apiVersion'])} ${String(obj['kind'])}`];
      const r = v.validate(obj);
      return [...r.schemaErrors, ...r.cel.failed, ...r.cel.unevaluated.map((u) => `${u} [rule not evaluated offline]`)];
    },
  };
}
