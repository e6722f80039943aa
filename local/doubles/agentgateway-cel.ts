/**
 * Test double: agentgateway v1.3.1's CEL (authorization, addRequestHeaders) on @bufbuild/cel.
 *
 * Reproduces (docs/upstream.md#agentgateway-cel):
 * - `request.headers`: lower-case keys; a repeated header is a list, a single one a string;
 *   `.raw()` (always lists), `.join()` (","-joined) and `.split()` (split on "," and trimmed), only on
 *   the header map (agentgateway cel/types.rs `Headers`);
 * - `request.body` is bytes; `json(bytes|string)` with integers as CEL ints (serde_json → cel::to_value);
 * - `string(bytes)`, the strings extension (`trim`, `lowerAscii`, `join`, …), `fail()`;
 * - authorization: a CEL error is "not matched"; `Require` needs every rule true, `Allow` any,
 *   `Deny` denies on any true (crates/agentgateway/src/http/authorization.rs `RuleSets::validate`);
 * - addRequestHeaders: a CEL error or a non-string value removes the header (http/mod.rs L178-180).
 * Not reproduced: binding/lazy helpers (`.with`, `default`, `coalesce`), which the renderer never
 * emits; `request.headers` exclusions (fixtures build headers as the gateway presents them).
 */
import {
  type CelResult,
  CelScalar,
  celEnv,
  celFunc,
  celMap,
  celMethod,
  isCelError,
  isCelList,
  isCelMap,
  mapType,
  parse,
  plan,
} from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';

const { STRING, BYTES, DYN, BOOL } = CelScalar;
const MAP = mapType(STRING, DYN);
type HeaderMode = 'first' | 'raw' | 'join' | 'split';
const headerViews = new WeakMap<object, Map<string, string[]>>();

export type HeaderInput = Record<string, string | string[]> | [string, string][];

function normHeaders(h: HeaderInput): Map<string, string[]> {
  const norm = new Map<string, string[]>();
  const entries = Array.isArray(h) ? h : Object.entries(h);
  for (const [k, v] of entries) {
    const name = k.toLowerCase();
    norm.set(name, [...(norm.get(name) ?? []), ...(Array.isArray(v) ? v : [v])]);
  }
  return norm;
}

function headersView(norm: Map<string, string[]>, mode: HeaderMode = 'first') {
  const view = new Map<string, unknown>();
  for (const [k, vals] of norm) {
    if (mode === 'raw') view.set(k, vals);
    else if (mode === 'join') view.set(k, vals.join(','));
    else if (mode === 'split')
      view.set(
        k,
        vals.flatMap((s) => s.split(',').map((x) => x.trim())),
      );
    else view.set(k, vals.length === 1 ? vals[0] : vals);
  }
  const m = celMap(view as Map<string, never>);
  headerViews.set(m as object, norm);
  return m;
}

function headerMode(mode: HeaderMode) {
  return function (this: unknown) {
    const norm = headerViews.get(this as object);
    if (!norm) throw new Error(`no such overload: ${mode}() on a non-header map`);
    return headersView(norm, mode);
  };
}

function fromJson(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(fromJson);
  if (v && typeof v === 'object') return new Map(Object.entries(v).map(([k, x]) => [k, fromJson(x)]));
  return typeof v === 'number' && Number.isInteger(v) ? BigInt(v) : v;
}

const utf8 = (b: Uint8Array) => new TextDecoder('utf-8', { fatal: true }).decode(b);

const env = celEnv({
  funcs: [
    ...strings,
    celFunc('json', [BYTES], DYN, (b: Uint8Array) => fromJson(JSON.parse(utf8(b))) as never),
    celFunc('json', [STRING], DYN, (s: string) => fromJson(JSON.parse(s)) as never),
    celFunc('fail', [STRING], BOOL, (m: string): boolean => {
      throw new Error(`fail() called: ${m}`);
    }),
    celMethod('raw', MAP, [], MAP, headerMode('raw') as never),
    celMethod('join', MAP, [], MAP, headerMode('join') as never),
    celMethod('split', MAP, [], MAP, headerMode('split') as never),
  ],
});

/** The CEL call names the emulator knows; tests reject rendered expressions using anything else. */
export const KNOWN_FUNCTIONS = new Set([
  'json',
  'fail',
  'raw',
  'join',
  'split',
  'size',
  'string',
  'has',
  'all',
  'exists',
  'filter',
  'map',
  'startsWith',
  'endsWith',
  'contains',
  'trim',
  'lowerAscii',
  'matches',
  'int',
  '_&&_',
  '_||_',
  '_==_',
  '_!=_',
  '!_',
  '@in',
  '_?_:_',
  '_[_]',
  '_<_',
  '_<=_',
  '_>_',
  '_>=_',
  '_+_',
  '@not_strictly_false',
]);

export interface GatewayRequest {
  method: string;
  path: string;
  headers?: HeaderInput;
  body?: string | Uint8Array;
  host?: string;
}

export interface GatewayContext {
  request: GatewayRequest;
  /** API-key metadata (flattened onto `apiKey`, e.g. `{workload: "matrix-a2a-bridge"}`). */
  apiKey?: Record<string, string>;
  /** Validated JWT claims. */
  jwt?: Record<string, unknown>;
  mcp?: { tool?: { name: string; target?: string } };
}

function bindings(ctx: GatewayContext): Record<string, unknown> {
  const r = ctx.request;
  const body = typeof r.body === 'string' || r.body === undefined ? new TextEncoder().encode(r.body ?? '') : r.body;
  const vars: Record<string, unknown> = {
    request: new Map<string, unknown>([
      ['method', r.method],
      ['path', r.path],
      ['host', r.host ?? 'gateway.example'],
      ['headers', headersView(normHeaders(r.headers ?? {}))],
      ['body', body],
    ]),
  };
  if (ctx.apiKey) vars['apiKey'] = new Map(Object.entries(ctx.apiKey));
  if (ctx.jwt) vars['jwt'] = fromJson(ctx.jwt);
  if (ctx.mcp) vars['mcp'] = fromJson(ctx.mcp);
  return vars;
}

/** Call names in an expression (for the "only emulated functions" check). */
export function callNames(expr: string): Set<string> {
  const out = new Set<string>();
  const walk = (e: any) => {
    if (!e || typeof e !== 'object') return;
    const k = e.exprKind;
    if (k?.case === 'callExpr') {
      out.add(k.value.function);
      walk(k.value.target);
      for (const a of k.value.args) walk(a);
    } else if (k?.case === 'selectExpr') {
      if (k.value.testOnly) out.add('has');
      walk(k.value.operand);
    } else if (k?.case === 'listExpr') for (const x of k.value.elements) walk(x);
    else if (k?.case === 'structExpr') for (const en of k.value.entries) walk(en.value);
    else if (k?.case === 'comprehensionExpr') {
      const c = k.value;
      for (const x of [c.iterRange, c.accuInit, c.loopCondition, c.loopStep, c.result]) walk(x);
    }
  };
  walk(parse(expr).expr);
  return out;
}

export function evaluate(expr: string, ctx: GatewayContext): CelResult {
  return plan(env, parse(expr))(bindings(ctx) as never);
}

export type Action = 'Require' | 'Allow' | 'Deny';

/** One rule set: `true` when the request passes it. Errors count as "not matched". */
export function authorize(action: Action, expressions: string[], ctx: GatewayContext): boolean {
  const results = expressions.map((e) => evaluate(e, ctx) === true);
  if (action === 'Require') return results.every(Boolean);
  if (action === 'Deny') return !results.some(Boolean);
  return results.some(Boolean);
}

/** Which Require rule fails first (for readable test failures). */
export function firstFailing(expressions: string[], ctx: GatewayContext): string | undefined {
  return expressions.find((e) => evaluate(e, ctx) !== true);
}

/** addRequestHeaders: name → value; a header whose CEL errors or is not a string is absent. */
export function checkRequestHeaders(add: Record<string, string>, ctx: GatewayContext): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, expr] of Object.entries(add)) {
    const v = evaluate(expr, ctx);
    if (!isCelError(v) && typeof v === 'string') out[name] = v;
  }
  return out;
}

export function toJs(v: unknown): unknown {
  if (isCelMap(v))
    return Object.fromEntries([...(v as Iterable<[unknown, unknown]>)].map(([k, x]) => [String(k), toJs(x)]));
  if (isCelList(v)) return [...(v as Iterable<unknown>)].map(toJs);
  if (typeof v === 'bigint') return Number(v);
  return v;
}

interface TransformationRequest {
  remove?: string[];
  set?: { name: string; value: string }[];
}
export interface Transformation {
  request?: TransformationRequest;
  conditional?: { condition?: string; policy: { request?: TransformationRequest } }[];
}

/**
 * Headers a route-level `traffic.transformation.request.set` writes: each CEL value evaluated against
 * the authenticated request (AG:crates/agentgateway/src/http/transformation_cel.rs L266-296: set
 * overwrites every value of the name). A value that fails to evaluate or is not a string leaves the
 * header unset here (the upstream handling of such an error is not verified); what reads the
 * header must then fail closed.
 */
export function transformationSets(t: Transformation | undefined, ctx: GatewayContext): [string, string][] {
  const out: [string, string][] = [];
  for (const s of t?.request?.set ?? []) {
    const v = evaluate(s.value, ctx);
    if (!isCelError(v) && typeof v === 'string') out.push([s.name.toLowerCase(), v]);
  }
  return out;
}

/**
 * Header names a `traffic.transformation` removes from a request: the plain form, or the first
 * `conditional` entry whose condition is true (an entry without a condition is the fallback; a CEL
 * error counts as not matched).
 */
export function transformationRemovals(t: Transformation | undefined, ctx: GatewayContext): string[] {
  if (!t) return [];
  if (!t.conditional) return t.request?.remove ?? [];
  for (const c of t.conditional)
    if (c.condition === undefined || evaluate(c.condition, ctx) === true) return c.policy.request?.remove ?? [];
  return [];
}
