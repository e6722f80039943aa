/**
 * Advisory warnings: what kagent's controller or runtime would only report later, or silently do,
 * for an Agent that is otherwise admitted. Never a denial. Pure.
 */
import { arr, type Ctx, refNamespace } from './kagent-common.ts';
import { field, isObject, type JsonObject, KAGENT_GROUP, str } from './types.ts';

/** Warnings for what kagent's controller or runtime would only report (or silently do) later. */
export function controllerWarnings(c: Ctx, decl: JsonObject): void {
  const { f, ns } = c;
  const p = 'spec.declarative';
  if (!Object.hasOwn(decl, 'systemMessage') && !Object.hasOwn(decl, 'systemMessageFrom'))
    f.warn(
      'kagent-no-system-message',
      p,
      'at least one system message source (SystemMessage or SystemMessageFrom) must be specified',
    );
  const mc = field(decl, 'modelConfig');
  if (typeof mc !== 'string' || mc === '')
    f.warn('kagent-no-model-config', `${p}.modelConfig`, 'no modelConfig: the controller will fail to resolve one');
  const runtime = field(decl, 'runtime');
  if (runtime === undefined)
    f.warn('kagent-runtime-default', `${p}.runtime`, 'runtime unset: python on kagent v0.9.11 but go from v0.10');
  if (runtime === 'go') {
    if (decl['executeCodeBlocks'] === true)
      f.warn('kagent-unsupported-feature', `${p}.executeCodeBlocks`, 'not supported by the go runtime');
    if (isObject(decl['context']) && Object.hasOwn(decl['context'], 'compaction'))
      f.warn('kagent-unsupported-feature', `${p}.context.compaction`, 'not supported by the go runtime');
  }
  const tools = arr(field(decl, 'tools')) ?? [];
  const gated = new Set<string>();
  for (const t of tools)
    for (const n of arr(field(field(t, 'mcpServer'), 'requireApproval')) ?? []) if (typeof n === 'string') gated.add(n);
  tools.forEach((t, i) => {
    const mcp = field(t, 'mcpServer');
    if (!isObject(mcp)) return;
    const mp = `${p}.tools[${i}].mcpServer`;
    const kind = str(mcp, 'kind') ?? '';
    const group = str(mcp, 'apiGroup') ?? '';
    const kagentKind = (kind === 'MCPServer' || kind === 'RemoteMCPServer') && (group === '' || group === KAGENT_GROUP);
    const serviceKind = kind === 'Service' && (group === '' || group === 'core');
    if (kind === '' && group === '')
      f.warn('kagent-kind-empty', mp, 'empty kind resolves to a kmcp MCPServer, not a RemoteMCPServer');
    else if (!kagentKind && !serviceKind)
      f.warn('kagent-unknown-server-type', mp, `unknown tool server type: ${kind}.${group}`.slice(0, 200));
    const target = refNamespace(mcp, ns);
    if (target !== ns) {
      if (kind === 'RemoteMCPServer')
        f.warn(
          'kagent-cross-namespace',
          `${mp}.namespace`,
          `cross-namespace reference to RemoteMCPServer ${target}/${str(mcp, 'name') ?? ''} is allowed only if its spec.allowedNamespaces admits ${ns}`,
        );
      else
        f.warn(
          'kagent-cross-namespace',
          `${mp}.namespace`,
          `${kind || 'MCPServer'} does not support cross-namespace references`,
        );
    }
    const tn = arr(field(mcp, 'toolNames'));
    if (!tn || tn.length === 0)
      f.warn('kagent-all-tools', `${mp}.toolNames`, 'empty toolNames exposes every tool of the server');
    const own = new Set(arr(field(mcp, 'requireApproval')) ?? []);
    for (const n of tn ?? [])
      if (typeof n === 'string' && gated.has(n) && !own.has(n))
        f.warn(
          'kagent-approval-global',
          `${mp}.toolNames`,
          `tool ${JSON.stringify(n)} is gated by requireApproval on another server; the gate applies to every server`,
        );
  });
}
