/**
 * The MCP revision gate of ADR 0017 decision 1 (docs/decisions.md#adr-1), applied before the SDK sees a request. SDK 1.32.2
 * accepts a missing MCP-Protocol-Version (treated as 2025-03-26) and negotiates older revisions
 * (docs/upstream.md#deps-mcp-sdk), so the pin lives here. Pure: parsed body + header values in, verdict out.
 */
export const MCP_REVISION = '2025-11-25';

export type GateVerdict =
  | { readonly ok: true; readonly method: string; readonly isInitialize: boolean }
  | { readonly ok: false; readonly status: number; readonly code: number; readonly message: string };

const bad = (message: string, code = -32600): GateVerdict => ({ ok: false, status: 400, code, message });

export function gateRequest(body: unknown, protocolHeader: readonly string[]): GateVerdict {
  if (Array.isArray(body)) return bad('JSON-RPC batches are not supported');
  if (typeof body !== 'object' || body === null) return bad('invalid JSON-RPC message');
  const msg = body as Record<string, unknown>;
  if (msg['jsonrpc'] !== '2.0' || typeof msg['method'] !== 'string')
    return bad('only JSON-RPC 2.0 requests and notifications are accepted');
  const method = msg['method'];
  if (protocolHeader.length > 1) return bad(`MCP-Protocol-Version must be ${MCP_REVISION}`);
  const header = protocolHeader[0];
  if (method === 'initialize') {
    const params = msg['params'];
    const offered =
      typeof params === 'object' && params !== null
        ? (params as Record<string, unknown>)['protocolVersion']
        : undefined;
    if (offered !== MCP_REVISION) return bad(`unsupported protocol version; supported: ${MCP_REVISION}`, -32602);
    if (header !== undefined && header !== MCP_REVISION) return bad(`MCP-Protocol-Version must be ${MCP_REVISION}`);
    return { ok: true, method, isInitialize: true };
  }
  if (header !== MCP_REVISION) return bad(`MCP-Protocol-Version must be ${MCP_REVISION}`);
  return { ok: true, method, isInitialize: false };
}

/** Origin check (DNS-rebinding protection): absent is fine; present must be configured or loopback. */
export function originAllowed(origin: string | undefined, allowed: readonly string[]): boolean {
  if (origin === undefined) return true;
  if (allowed.includes(origin)) return true;
  try {
    const u = new URL(origin);
    if (u.origin !== origin) return false;
    return u.hostname === 'localhost' || u.hostname === '127.0.0.1' || u.hostname === '[::1]';
  } catch {
    return false;
  }
}
