/**
 * HTTP URLs our resources carry to the servers and the gateway: the embeddings endpoint
 * (`retrieval.json`), the homeserver of the live room check (`projector.json`), the proxy URL of the
 * RemoteMCPServer and the JWKS Service. The servers parse them with WHATWG `URL` (Node's); a URL the
 * CRD admitted and `URL` refused, such as a port above 65535, made the server refuse its whole
 * configuration and deny every request. So there is one grammar, the one below, and every layer
 * decides with it: the CRD (pattern and CEL rule), the webhook, the render and both servers' loaders.
 *
 * `http` or `https`, `://`, a host, an optional port 1-65535, an optional path; nothing else:
 * - host: DNS labels of letters, digits and hyphens joined by dots, or a dotted-quad IPv4 address
 *   without leading zeros, or a bracketed IPv6 address (`contract/identifiers.ts`);
 * - a host whose last label is a number (digits, or `0x` and hex digits) must be a dotted-quad
 *   IPv4 address: WHATWG reads such a host as an IPv4 number and refuses or rewrites it otherwise
 *   (`http://999.1.1.1`, `http://1.2.3`, `http://0x7f.1`);
 * - no user information, query or fragment (a credential in a URL ends up in logs);
 * - the path in RFC 3986 `pchar`s and `/` only;
 * - at most 2,048 characters.
 * A Kubernetes `pattern` is RE2 without lookahead, so the number rule is a CEL rule beside it.
 * Every string this module accepts parses with `URL` to the same scheme, host and port
 * (rules/urls.test.ts checks it on generated strings). Pure.
 */
import { IPV4_SOURCE, IPV6_BRACKETED_SOURCE } from '../contract/index.ts';
import { celString } from './names.ts';
import { type Problem, problem } from './result.ts';

export const HTTP_URL_MAX = 2048;

const DNS_LABEL = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
const DNS_HOST = `${DNS_LABEL}(?:\\.${DNS_LABEL})*`;
const PORT =
  '(?:0{0,4}[1-9]|0{0,3}[1-9][0-9]|0{0,2}[1-9][0-9]{2}|0?[1-9][0-9]{3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])';
const PATH = "(?:/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*)?";

export const HTTP_URL_PATTERN = `^https?://(?:${DNS_HOST}|${IPV6_BRACKETED_SOURCE})(?::${PORT})?${PATH}$`;
/** A host (not bracketed) whose last label is a number. */
const NUMERIC_END = '^https?://(?:[^/:\\[\\]]*\\.)?(?:[0-9]+|0[xX][0-9A-Fa-f]*)(?::[0-9]*)?(?:/.*)?$';
const IPV4_HOST = `^https?://${IPV4_SOURCE}(?::[0-9]+)?(?:/.*)?$`;

const URL_RE = new RegExp(HTTP_URL_PATTERN);
const NUMERIC_END_RE = new RegExp(NUMERIC_END);
const IPV4_HOST_RE = new RegExp(IPV4_HOST);

/** The CRD's number rule, from the same sources. */
export const HTTP_URL_CEL = {
  rule: `!self.matches(${celString(NUMERIC_END)}) || self.matches(${celString(IPV4_HOST)})`,
  message: 'a host whose last label is a number must be a dotted-quad IPv4 address',
} as const;

export function isHttpUrl(v: unknown, max = HTTP_URL_MAX): v is string {
  return (
    typeof v === 'string' && v.length <= max && URL_RE.test(v) && (!NUMERIC_END_RE.test(v) || IPV4_HOST_RE.test(v))
  );
}

const HTTP_URL_MESSAGE =
  'must be http(s)://host[:port][/path]: a DNS name, IPv4 or [IPv6] host, port 1-65535, no user, query or fragment';

/** Absent is fine here; whether the field is required is the caller's rule. */
export function checkHttpUrl(v: unknown, path: string, max = HTTP_URL_MAX): Problem[] {
  if (v === undefined) return [];
  return isHttpUrl(v, max) ? [] : [problem('http-url', path, `${HTTP_URL_MESSAGE}, at most ${max}`)];
}

export function httpUrlSchema(maxLength = HTTP_URL_MAX) {
  return { pattern: HTTP_URL_PATTERN, maxLength, 'x-kubernetes-validations': [{ ...HTTP_URL_CEL }] };
}

/**
 * An in-cluster Service URL, `http(s)://<service>.<namespace>.svc[.cluster.local][:port][/path]`:
 * the gateway reaches the JWKS through a Service reference, so the render needs the Service, its
 * namespace and port from the URL. A subset of the HTTP URL grammar.
 */
const SERVICE_URL_PATTERN = `^(https?)://([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)\\.([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)\\.svc(?:\\.cluster\\.local)?(?::(${PORT}))?(${PATH})$`;
const SERVICE_URL_RE = new RegExp(SERVICE_URL_PATTERN);
export const SERVICE_URL_SCHEMA = {
  pattern: SERVICE_URL_PATTERN,
  maxLength: HTTP_URL_MAX,
} as const;

export interface ServiceUrl {
  service: string;
  namespace: string;
  port: number;
  path: string;
  tls: boolean;
}

export function parseServiceUrl(v: unknown): ServiceUrl | undefined {
  if (typeof v !== 'string' || v.length > HTTP_URL_MAX) return undefined;
  const m = SERVICE_URL_RE.exec(v);
  if (!m) return undefined;
  const tls = m[1] === 'https';
  // The path as the gateway will request it (dot segments resolved, as URL does).
  const path = new URL(v).pathname || '/';
  return {
    service: m[2] as string,
    namespace: m[3] as string,
    port: m[4] ? Number(m[4]) : tls ? 443 : 80,
    path,
    tls,
  };
}

export function checkServiceUrl(v: unknown, path: string): Problem[] {
  if (v === undefined) return [];
  return parseServiceUrl(v)
    ? []
    : [
        problem(
          'service-url',
          path,
          'must be an in-cluster Service URL http(s)://<service>.<namespace>.svc[.cluster.local][:port][/path]',
        ),
      ];
}
