/**
 * AdmissionReview v1 adapter: request JSON → rules → response JSON. Never throws: malformed reviews get
 * a 400 answer naming what is wrong, an internal failure a 500 denial (fail closed).
 */
import { type ErrorFields, errorFields } from '../common/error-fields.ts';
import { reviewAgent, reviewRemoteMcpServer } from './rules/kagent-agent.ts';
import { reviewRetrievalResource } from './rules/retrieval-resources.ts';
import {
  type AdmissionInput,
  type ClusterView,
  DEFAULT_RULES_CONFIG,
  type Finding,
  formatFinding,
  isObject,
  KAGENT_GROUP,
  type KubeObject,
  nameOf,
  namespaceOf,
  type Operation,
  RETRIEVAL_GROUP,
  type RulesConfig,
  type Verdict,
} from './rules/types.ts';

export const ADMISSION_API_VERSION = 'admission.k8s.io/v1';
const MAX_MESSAGE = 2048;
const MAX_WARNING = 256;
const MAX_WARNINGS = 16;

export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: { code: number; reason: string; message: string };
  warnings?: string[];
}

export interface AdmissionReviewOut {
  apiVersion: typeof ADMISSION_API_VERSION;
  kind: 'AdmissionReview';
  response: AdmissionResponse;
}

export type VerdictLabel = 'allowed' | 'denied' | 'error';

export interface ReviewOutcome {
  review: AdmissionReviewOut;
  /** Bounded label values for metrics and logs (no object content). */
  kind: string;
  verdict: VerdictLabel;
  reason: string;
  namespace: string;
  name: string;
  /** When the review itself threw: the class and code only (common/error-fields.ts). */
  error?: ErrorFields;
}

const KNOWN_KINDS = new Set([
  'Agent',
  'RemoteMCPServer',
  'RetrievalAgent',
  'RetrievalRoom',
  'PartnerClient',
  'RetrievalPlatform',
]);
const OPERATIONS = new Set<Operation>(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']);

/** The rules for one request, independent of the wire format. */
export function decide(input: AdmissionInput, view: ClusterView, cfg: RulesConfig = DEFAULT_RULES_CONFIG): Verdict {
  const { group, kind } = input.kind;
  if (group === KAGENT_GROUP && kind === 'Agent') return reviewAgent(input, view, cfg);
  if (group === KAGENT_GROUP && kind === 'RemoteMCPServer') return reviewRemoteMcpServer(input, view, cfg);
  if (group === RETRIEVAL_GROUP) return reviewRetrievalResource(input, view, cfg);
  return {
    denials: [
      {
        reason: 'kind-unsupported',
        path: 'kind',
        message: `${group}/${kind} is not handled by this webhook`,
      },
    ],
    warnings: [],
  };
}

function clip(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

export function denialMessage(kind: string, ns: string, name: string, denials: readonly Finding[]): string {
  const who = ns ? `${kind} ${ns}/${name}` : `${kind} ${name}`;
  let msg = `${who} denied by fgentic-retrieval: `;
  let shown = 0;
  for (const d of denials) {
    const part = `${shown > 0 ? '; ' : ''}${formatFinding(d)}`;
    if (msg.length + part.length > MAX_MESSAGE - 40) break;
    msg += part;
    shown++;
  }
  if (shown < denials.length) msg += `; and ${denials.length - shown} more`;
  return msg;
}

export function warningTexts(warnings: readonly Finding[]): string[] {
  return warnings.slice(0, MAX_WARNINGS).map((w) => clip(`fgentic-retrieval: ${formatFinding(w)}`, MAX_WARNING));
}

function errorOutcome(uid: string, code: number, reason: string, message: string, label: string): ReviewOutcome {
  return {
    review: {
      apiVersion: ADMISSION_API_VERSION,
      kind: 'AdmissionReview',
      response: { uid, allowed: false, status: { code, reason, message } },
    },
    kind: 'unknown',
    verdict: 'error',
    reason: label,
    namespace: '',
    name: '',
  };
}

function malformed(uid: string, why: string): ReviewOutcome {
  return errorOutcome(uid, 400, 'BadRequest', `malformed AdmissionReview: ${why}`, 'malformed');
}

type Parsed = { input: AdmissionInput; uid: string } | { error: string; uid: string };

/** Validates the AdmissionReview envelope and extracts what the rules need. */
export function parseReview(body: unknown): Parsed {
  if (!isObject(body)) return { error: 'body is not a JSON object', uid: '' };
  const request = body['request'];
  const uid = isObject(request) && typeof request['uid'] === 'string' ? request['uid'] : '';
  if (body['apiVersion'] !== ADMISSION_API_VERSION)
    return { error: `apiVersion must be ${ADMISSION_API_VERSION}`, uid };
  if (body['kind'] !== 'AdmissionReview') return { error: 'kind must be AdmissionReview', uid };
  if (!isObject(request)) return { error: 'request is missing', uid };
  if (uid === '') return { error: 'request.uid is missing', uid };
  const k = request['kind'];
  if (
    !isObject(k) ||
    typeof k['group'] !== 'string' ||
    typeof k['version'] !== 'string' ||
    typeof k['kind'] !== 'string'
  )
    return { error: 'request.kind must be {group, version, kind} strings', uid };
  const op = request['operation'];
  if (typeof op !== 'string' || !OPERATIONS.has(op as Operation))
    return { error: 'request.operation must be CREATE, UPDATE, DELETE or CONNECT', uid };
  const sub = request['subResource'];
  if (sub !== undefined && sub !== null && sub !== '') return { error: 'subresources are not reviewed', uid };
  const obj = request['object'];
  const old = request['oldObject'];
  if (obj !== undefined && obj !== null && !isObject(obj)) return { error: 'request.object must be an object', uid };
  if (old !== undefined && old !== null && !isObject(old)) return { error: 'request.oldObject must be an object', uid };
  const object = (obj ?? null) as KubeObject | null;
  const oldObject = (old ?? null) as KubeObject | null;
  if ((op === 'CREATE' || op === 'UPDATE') && !object) return { error: `${op} without request.object`, uid };
  if ((op === 'UPDATE' || op === 'DELETE') && !oldObject) return { error: `${op} without request.oldObject`, uid };
  const userInfo = request['userInfo'];
  const username = isObject(userInfo) && typeof userInfo['username'] === 'string' ? userInfo['username'] : '';
  const ns = request['namespace'];
  const name = request['name'];
  return {
    uid,
    input: {
      operation: op as Operation,
      kind: { group: k['group'], version: k['version'], kind: k['kind'] },
      object,
      oldObject,
      namespace: typeof ns === 'string' ? ns : namespaceOf(object ?? oldObject),
      name: typeof name === 'string' && name !== '' ? name : nameOf(object ?? oldObject),
      username,
    },
  };
}

/** Turns a verdict into the AdmissionReview response. */
export function respond(uid: string, input: AdmissionInput, verdict: Verdict): ReviewOutcome {
  const kind = KNOWN_KINDS.has(input.kind.kind) ? input.kind.kind : 'other';
  const response: AdmissionResponse = { uid, allowed: verdict.denials.length === 0 };
  if (verdict.denials.length > 0)
    response.status = {
      code: 403,
      reason: 'Forbidden',
      message: denialMessage(input.kind.kind, input.namespace, input.name, verdict.denials),
    };
  if (verdict.warnings.length > 0) response.warnings = warningTexts(verdict.warnings);
  return {
    review: { apiVersion: ADMISSION_API_VERSION, kind: 'AdmissionReview', response },
    kind,
    verdict: response.allowed ? 'allowed' : 'denied',
    reason: verdict.denials[0]?.reason ?? (verdict.warnings.length > 0 ? 'warnings' : 'ok'),
    namespace: input.namespace,
    name: input.name,
  };
}

/** A decoded AdmissionReview → outcome. Never throws. */
export function review(body: unknown, view: ClusterView, cfg: RulesConfig = DEFAULT_RULES_CONFIG): ReviewOutcome {
  let uid = '';
  try {
    const parsed = parseReview(body);
    uid = parsed.uid;
    if ('error' in parsed) return malformed(parsed.uid, parsed.error);
    return respond(parsed.uid, parsed.input, decide(parsed.input, view, cfg));
  } catch (e) {
    return {
      ...errorOutcome(uid, 500, 'InternalError', 'internal error while reviewing; denied (fail closed)', 'internal'),
      error: errorFields(e),
    };
  }
}

function utf8(bytes: Uint8Array): string {
  return Buffer.isBuffer(bytes)
    ? bytes.toString('utf8')
    : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
}

/** The answer while the webhook cannot decide (cluster cache not synced yet): a denial, fail closed. */
export function reviewUnavailable(bytes: string | Uint8Array, why: string): ReviewOutcome {
  let uid = '';
  try {
    const body: unknown = JSON.parse(typeof bytes === 'string' ? bytes : utf8(bytes));
    const request = isObject(body) ? body['request'] : undefined;
    if (isObject(request) && typeof request['uid'] === 'string') uid = request['uid'];
  } catch {
    // A body that is not JSON has no uid to echo; the denial below stands either way.
  }
  return errorOutcome(
    uid,
    503,
    'ServiceUnavailable',
    `fgentic-retrieval webhook unavailable: ${why}; denied, retry`,
    'unavailable',
  );
}

/** Raw request bytes → outcome. Never throws. */
export function reviewBytes(
  bytes: string | Uint8Array,
  view: ClusterView,
  cfg: RulesConfig = DEFAULT_RULES_CONFIG,
): ReviewOutcome {
  let body: unknown;
  try {
    body = JSON.parse(typeof bytes === 'string' ? bytes : utf8(bytes));
  } catch {
    return malformed('', 'body is not valid JSON');
  }
  return review(body, view, cfg);
}

export interface MakeReviewOptions {
  operation?: Operation;
  username?: string;
  oldObject?: KubeObject | null;
  uid: string;
}

/** Builds the AdmissionReview v1 request the apiserver would send for `object` (offline check, tests). */
export function makeAdmissionReview(object: KubeObject | null, opts: MakeReviewOptions): Record<string, unknown> {
  const operation = opts.operation ?? 'CREATE';
  const subject = (object ?? opts.oldObject ?? {}) as KubeObject;
  const apiVersion = typeof subject['apiVersion'] === 'string' ? subject['apiVersion'] : '';
  const slash = apiVersion.indexOf('/');
  const group = slash < 0 ? '' : apiVersion.slice(0, slash);
  const version = apiVersion.slice(slash + 1);
  const kind = typeof subject['kind'] === 'string' ? subject['kind'] : '';
  const resource = { group, version, resource: `${kind.toLowerCase()}s` };
  const ns = namespaceOf(subject);
  return {
    apiVersion: ADMISSION_API_VERSION,
    kind: 'AdmissionReview',
    request: {
      uid: opts.uid,
      kind: { group, version, kind },
      resource,
      requestKind: { group, version, kind },
      requestResource: resource,
      name: nameOf(subject),
      ...(ns !== '' ? { namespace: ns } : {}),
      operation,
      userInfo: { username: opts.username ?? '', groups: ['system:authenticated'] },
      object: operation === 'DELETE' ? null : object,
      oldObject: operation === 'CREATE' ? null : (opts.oldObject ?? null),
      dryRun: false,
      options: null,
    },
  };
}
