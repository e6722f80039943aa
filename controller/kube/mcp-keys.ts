/**
 * Mirrors each rendered retrieval Agent's MCP API key into the gateway namespace in the JSON form
 * agentgateway's `apiKeyAuthentication` reads (docs/interfaces.md "API keys"): `{"key": "...",
 * "metadata": {"workload": "<namespace>/<name>"}}`, labelled for the MCP routes' `secretSelector`.
 * The source is the Secret the kagent Agent already sends as `Authorization: Bearer <key>`
 * (`spec.mcpApiKeySecretRef`), so the two can never disagree. Adapter code: reads Secrets, so it is
 * not part of the pure render (offline `render` users create these Secrets themselves).
 *
 * Least privilege (deploy/README.md "RBAC"): the controller reads each source Secret by name only,
 * never lists or watches Secrets, and in the gateway namespace reads only the mirrors, by name (a
 * resync writes a mirror only when it differs: reconcile.ts `applyMirrors`). Each mirror is owned by
 * its Agent's MCP route policy (same namespace), so the garbage collector removes it with the policy;
 * a mirror whose source became unusable is deleted by its fixed name (`mirrorName`).
 */
import { MANAGED_LABELS, MCP_KEY_LABEL } from '../render/model.ts';
import type { K8sObject } from '../types.ts';

/** kagent `headersFrom` entry: a static value or a Secret reference. */
interface HeaderFrom {
  name: string;
  value?: string;
  valueFrom?: { type?: string; name?: string; key?: string };
}
export interface SecretReader {
  readSecretKey(namespace: string, name: string, key: string): Promise<string | undefined>;
}

export interface MirrorResult {
  /**
   * Mirrors to apply, each with the name of the per-Agent MCP policy that must own it and the
   * `namespace/name` of its RetrievalAgent.
   */
  secrets: { secret: K8sObject; ownerPolicy: string; workload: string }[];
  /** `namespace/name` of an Agent whose key could not be mirrored → reason. */
  problems: Map<string, string>;
  /** Mirrors that must not exist (their Agent has a problem), in the gateway namespace. */
  stale: K8sObject[];
}

/** The mirror's fixed name, so it can be deleted without listing the gateway namespace's Secrets. */
export const mirrorName = (namespace: string, name: string) => `fgentic-mcp-key.${namespace}.${name}`;

const BEARER = /^Bearer ([\x21-\x7e]{16,4096})\s*$/;

export async function mirrorMcpKeys(api: SecretReader, rendered: K8sObject[]): Promise<MirrorResult> {
  const secrets: MirrorResult['secrets'] = [];
  const problems = new Map<string, string>();
  const stale: K8sObject[] = [];
  const policies = new Map(
    rendered
      .filter((o) => o.kind === 'AgentgatewayPolicy' && o.metadata.name.startsWith('fgentic-mcp.'))
      .map((o) => [o.metadata.name, o.metadata.namespace as string]),
  );
  for (const o of rendered) {
    if (o.kind !== 'Agent' || o.apiVersion !== 'kagent.dev/v1alpha2') continue;
    const ns = o.metadata.namespace as string;
    const workload = `${ns}/${o.metadata.name}`;
    const ownerPolicy = `fgentic-mcp.${ns}.${o.metadata.name}`;
    const gatewayNs = policies.get(ownerPolicy);
    if (!gatewayNs) continue;
    const drop = () =>
      stale.push({
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: mirrorName(ns, o.metadata.name), namespace: gatewayNs },
      });
    const tools =
      (o as { spec?: { declarative?: { tools?: { headersFrom?: HeaderFrom[] }[] } } }).spec?.declarative?.tools ?? [];
    const ref = tools[0]?.headersFrom?.find((h) => h.name === 'Authorization')?.valueFrom;
    if (!ref?.name || !ref?.key) continue;
    let value: string | undefined;
    try {
      value = await api.readSecretKey(ns, ref.name, ref.key);
    } catch (e) {
      problems.set(workload, `cannot read Secret ${ns}/${ref.name}: ${reasonOf(e)}`);
      drop();
      continue;
    }
    const m = value === undefined ? null : BEARER.exec(value);
    if (!m) {
      problems.set(
        workload,
        value === undefined
          ? `Secret ${ns}/${ref.name} key ${ref.key} is missing`
          : `Secret ${ns}/${ref.name} key ${ref.key} is not "Bearer <key>" (16-4096 visible ASCII characters)`,
      );
      drop();
      continue;
    }
    const entry = JSON.stringify({ key: m[1], metadata: { workload } });
    secrets.push({
      ownerPolicy,
      workload,
      secret: {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: {
          name: mirrorName(ns, o.metadata.name),
          namespace: gatewayNs,
          labels: { ...MANAGED_LABELS, [MCP_KEY_LABEL]: 'mcp' },
        },
        type: 'Opaque',
        data: { [workload.replace('/', '.')]: Buffer.from(entry).toString('base64') },
      },
    });
  }
  return { secrets, problems, stale };
}

/** The apiserver's reason (Forbidden, NotFound, …) without any response body. */
export function reasonOf(e: unknown): string {
  const x = e as { code?: number; body?: unknown };
  let reason: string | undefined;
  try {
    const b = typeof x.body === 'string' ? JSON.parse(x.body) : x.body;
    reason = (b as { reason?: string } | undefined)?.reason;
  } catch {
    reason = undefined;
  }
  return x.code ? `HTTP ${x.code}${reason ? ` ${reason}` : ''}` : 'request failed';
}
