/**
 * Mirrors each rendered retrieval Agent's MCP API key into the gateway namespace in the JSON form
 * agentgateway's `apiKeyAuthentication` reads (docs/interfaces.md "API keys"): `{"key": "...",
 * "metadata": {"workload": "<namespace>/<name>"}}`, labelled for the MCP routes' `secretSelector`.
 * The source is the Secret the kagent Agent already sends as `Authorization: Bearer <key>`
 * (`spec.mcpApiKeySecretRef`), so the two can never disagree. Adapter code: reads Secrets, so it is
 * not part of the pure render (offline `render` users create these Secrets themselves).
 */
import { MANAGED_LABELS, MCP_KEY_LABEL } from '../render/model.ts';
import type { K8sObject, OwnerReference } from '../types.ts';

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
  secrets: K8sObject[];
  /** `namespace/name` of an Agent whose key could not be mirrored → reason. */
  problems: Map<string, string>;
}

const BEARER = /^Bearer ([\x21-\x7e]{16,4096})\s*$/;

export async function mirrorMcpKeys(api: SecretReader, rendered: K8sObject[]): Promise<MirrorResult> {
  const secrets: K8sObject[] = [];
  const problems = new Map<string, string>();
  const mcpPolicy = rendered.find(
    (o) => o.kind === 'AgentgatewayPolicy' && o.metadata.name.startsWith('fgentic-mcp.'),
  );
  const gatewayNs = mcpPolicy?.metadata.namespace;
  const owner = mcpPolicy?.metadata.ownerReferences?.[0] as OwnerReference | undefined;
  if (!gatewayNs) return { secrets, problems };
  for (const o of rendered) {
    if (o.kind !== 'Agent' || o.apiVersion !== 'kagent.dev/v1alpha2') continue;
    const ns = o.metadata.namespace as string;
    const workload = `${ns}/${o.metadata.name}`;
    const tools =
      (o as { spec?: { declarative?: { tools?: { headersFrom?: HeaderFrom[] }[] } } }).spec?.declarative
        ?.tools ?? [];
    const ref = tools[0]?.headersFrom?.find((h) => h.name === 'Authorization')?.valueFrom;
    if (!ref?.name || !ref?.key) continue;
    let value: string | undefined;
    try {
      value = await api.readSecretKey(ns, ref.name, ref.key);
    } catch (e) {
      problems.set(workload, `cannot read Secret ${ns}/${ref.name}: ${(e as Error).message}`);
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
      continue;
    }
    const entry = JSON.stringify({ key: m[1], metadata: { workload } });
    secrets.push({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: `fgentic-mcp-key.${ns}.${o.metadata.name}`,
        namespace: gatewayNs,
        labels: { ...MANAGED_LABELS, [MCP_KEY_LABEL]: 'mcp' },
        ...(owner ? { ownerReferences: [owner] } : {}),
      },
      type: 'Opaque',
      data: { [workload.replace('/', '.')]: Buffer.from(entry).toString('base64') },
    });
  }
  return { secrets, problems };
}
