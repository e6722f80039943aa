/**
 * The RetrievalPlatform: every field that reaches `projector.json`, `retrieval.json` or a rendered
 * gateway, kagent or NetworkPolicy object, checked with the one rule of its family. The webhook
 * denies with these problems, the render reports the first as the platform's `Invalid` conflict,
 * and the CRD carries the same rules as schema (crds/schema.ts builds it from the same
 * modules). Pure.
 */
import { isObject as isObj, type JsonRecord } from '../common/json-read.ts';
import { isServerName } from '../contract/index.ts';
import { checkBridgeRegexes } from './bridge.ts';
import { checkReplicaSettings } from './database.ts';
import { checkEmbeddings } from './embeddings.ts';
import { checkIssuer } from './issuers.ts';
import { checkLabel, checkLabelMap, checkPort, checkSecretKeyRef, isPort } from './kube.ts';
import { CAPABILITY_MODES, checkLedgerTiming, isCapabilityMode } from './ledger.ts';
import { checkLocalGroups } from './partners.ts';
import { at, type Problem, problem } from './result.ts';
import { checkPublicTimeout } from './timeouts.ts';
import { checkHttpUrl, checkServiceUrl } from './urls.ts';

export const PLATFORM_NAME = 'default';
export const A2A_BACKENDS = ['controller', 'agentService'] as const;
export const MCP_URL_MAX = 512;
export const MAX_OBSERVABILITY_PORTS = 4;

type Obj = JsonRecord;

/** A required object: its problems, or one `required` problem when it is missing. */
function section(s: Obj, key: string, path: string, check: (o: Obj, p: string) => Problem[]): Problem[] {
  const v = s[key];
  return isObj(v) ? check(v, at(path, key)) : [problem('required', at(path, key), 'required')];
}

/** An optional object. */
function optional(s: Obj, key: string, path: string, check: (o: Obj, p: string) => Problem[]): Problem[] {
  const v = s[key];
  if (v === undefined) return [];
  return isObj(v) ? check(v, at(path, key)) : [problem('schema', at(path, key), 'must be an object')];
}

function gateway(g: Obj, p: string): Problem[] {
  return [
    ...checkLabel(g['name'], at(p, 'name')),
    ...checkLabel(g['namespace'], at(p, 'namespace')),
    ...checkLabel(g['localListener'], at(p, 'localListener')),
    ...checkLabel(g['publicListener'], at(p, 'publicListener'), true),
    ...checkLabel(g['mcpListener'], at(p, 'mcpListener'), true),
    ...checkHttpUrl(g['mcpUrl'], at(p, 'mcpUrl'), MCP_URL_MAX),
    ...checkLabelMap(g['proxyPodLabels'], at(p, 'proxyPodLabels')),
  ];
}

function namespaces(n: Obj, p: string): Problem[] {
  return ['retrieval', 'kagent', 'gateway'].flatMap((k) => checkLabel(n[k], at(p, k)));
}

function bridge(b: Obj, p: string): Problem[] {
  return [
    ...checkLabel(b['workload'], at(p, 'workload')),
    ...checkSecretKeyRef(b['apiKeySecretRef'], at(p, 'apiKeySecretRef')),
    ...(typeof b['localServer'] === 'string' && isServerName(b['localServer'])
      ? []
      : [problem('server-name', at(p, 'localServer'), 'not a Matrix server name')]),
    ...checkBridgeRegexes(b, p),
  ];
}

function jwt(j: Obj, p: string, publicListener: unknown): Problem[] {
  const out = checkIssuer(j['issuer'], at(p, 'issuer'));
  if ((j['jwksSecretRef'] === undefined) === (j['jwksUri'] === undefined))
    out.push(problem('jwt', p, 'exactly one of jwksSecretRef or jwksUri'));
  if (j['jwksSecretRef'] !== undefined) out.push(...checkSecretKeyRef(j['jwksSecretRef'], at(p, 'jwksSecretRef')));
  out.push(...checkServiceUrl(j['jwksUri'], at(p, 'jwksUri')));
  if (publicListener === undefined) out.push(problem('jwt', p, 'jwt needs gateway.publicListener'));
  return out;
}

function service(o: Obj, p: string): Problem[] {
  return [...checkLabel(o['service'], at(p, 'service'), true), ...checkPort(o['port'], at(p, 'port'))];
}

function liveRoomCheck(l: Obj, p: string): Problem[] {
  const out: Problem[] = [];
  if (l['enabled'] !== undefined && typeof l['enabled'] !== 'boolean')
    out.push(problem('schema', at(p, 'enabled'), 'must be a boolean'));
  out.push(...checkHttpUrl(l['homeserverUrl'], at(p, 'homeserverUrl')));
  if (l['tokenSecretRef'] !== undefined) out.push(...checkSecretKeyRef(l['tokenSecretRef'], at(p, 'tokenSecretRef')));
  if (l['enabled'] === true && (l['homeserverUrl'] === undefined || l['tokenSecretRef'] === undefined))
    out.push(problem('live-room-check', p, 'an enabled live room check needs homeserverUrl and tokenSecretRef'));
  return out;
}

function peers(o: Obj, p: string, portsKey: 'port' | 'ports'): Problem[] {
  const out = [
    ...checkLabel(o['namespace'], at(p, 'namespace'), true),
    ...checkLabelMap(o['podLabels'], at(p, 'podLabels')),
  ];
  if (portsKey === 'port') return [...out, ...checkPort(o['port'], at(p, 'port'))];
  const ports = o['ports'];
  if (ports === undefined) return out;
  if (
    !Array.isArray(ports) ||
    ports.length > MAX_OBSERVABILITY_PORTS ||
    new Set(ports).size !== ports.length ||
    !ports.every(isPort)
  )
    out.push(problem('port', at(p, 'ports'), `must be at most ${MAX_OBSERVABILITY_PORTS} unique ports 1-65535`));
  return out;
}

/** Everything of `spec` but the required sections, which `checkPlatform` reports. */
function settings(s: Obj): Problem[] {
  const out: Problem[] = [
    ...checkLocalGroups(s['localGroups'], 'spec.localGroups'),
    ...checkPublicTimeout(s['publicRetrievalTimeoutSeconds'], 'spec.publicRetrievalTimeoutSeconds'),
    ...optional(s, 'jwt', 'spec', (j, p) =>
      jwt(j, p, isObj(s['gateway']) ? s['gateway']['publicListener'] : undefined),
    ),
    ...optional(s, 'projector', 'spec', service),
    ...optional(s, 'retrieval', 'spec', service),
    ...checkEmbeddings(s['embeddings'], 'spec.embeddings'),
    ...optional(s, 'liveRoomCheck', 'spec', liveRoomCheck),
    ...optional(s, 'database', 'spec', (o, p) => [...peers(o, p, 'port'), ...checkReplicaSettings(o, p)]),
    ...optional(s, 'observability', 'spec', (o, p) => peers(o, p, 'ports')),
    ...checkLedgerTiming(s['ledger'], 'spec.ledger'),
  ];
  const backend = s['a2aBackend'];
  if (backend !== undefined && !(A2A_BACKENDS as readonly unknown[]).includes(backend))
    out.push(problem('a2a-backend', 'spec.a2aBackend', `must be ${A2A_BACKENDS.join(' or ')}`));
  if (s['capability'] !== undefined && !isCapabilityMode(s['capability']))
    out.push(problem('capability', 'spec.capability', `must be ${CAPABILITY_MODES.join(' or ')}`));
  return out;
}

/** A RetrievalPlatform: its name and every field of its spec. */
export function checkPlatform(p: { metadata?: { name?: unknown }; spec?: unknown }): Problem[] {
  const out: Problem[] = [];
  if (p.metadata?.name !== PLATFORM_NAME)
    out.push(problem('platform-name', 'metadata.name', `the RetrievalPlatform must be named ${PLATFORM_NAME}`));
  const s = p.spec;
  if (!isObj(s)) return [...out, problem('required', 'spec', 'required')];
  return [
    ...out,
    ...section(s, 'gateway', 'spec', gateway),
    ...section(s, 'namespaces', 'spec', namespaces),
    ...section(s, 'bridge', 'spec', bridge),
    ...settings(s),
  ];
}
