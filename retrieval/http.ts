/**
 * HTTP adapter: /mcp, /healthz (process up), /readyz (database reachable, embedding profile
 * matches, and with a live configuration: one is loaded and not stale), /metrics (own registry).
 * Nothing here logs request content.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { errorFields } from '../common/error-fields.ts';
import { createLogger } from '../common/log.ts';
import { handleMcp, type McpContext } from './mcp/server.ts';

const log = createLogger('retrieval');

export interface HttpContext extends McpContext {
  /** Live readiness probe: DB reachable and profile matches. */
  readonly checkReady: () => Promise<boolean>;
  /** True once shutdown began: /readyz answers 503 while in-flight calls finish. */
  readonly draining?: () => boolean;
  /** A short, content-free note on the configuration for the /readyz body (why not ready, or a rejection). */
  readonly readyDetail?: () => string | undefined;
}

function send(res: ServerResponse, status: number, body: string, type = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
  res.end(body);
}

export function createHttpServer(ctx: HttpContext): Server {
  return createServer((req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0];
    const route = path === '/mcp' || path === '/healthz' || path === '/readyz' || path === '/metrics' ? path : 'other';
    const end = ctx.metrics.httpSeconds.startTimer({ route });
    res.on('finish', () => end({ status: String(res.statusCode) }));
    const fail = () => {
      if (!res.headersSent) send(res, 500, 'internal error\n');
      else res.destroy();
    };
    try {
      if (path === '/mcp') {
        handleMcp(req, res, ctx).catch((err: unknown) => {
          log.error('mcp request failed', errorFields(err));
          fail();
        });
        return;
      }
      if (req.method !== 'GET') return send(res, 405, 'method not allowed\n');
      if (path === '/healthz') return send(res, 200, 'ok\n');
      if (path === '/readyz') {
        if (ctx.draining?.()) return send(res, 503, 'not ready\n');
        ctx
          .checkReady()
          .then((ok) => {
            const detail = ctx.readyDetail?.();
            const text = ok ? 'ready' : 'not ready';
            send(res, ok ? 200 : 503, detail ? `${text} (${detail})\n` : `${text}\n`);
          })
          .catch(() => send(res, 503, 'not ready\n'));
        return;
      }
      if (path === '/metrics') {
        ctx.metrics.registry
          .metrics()
          .then((text) => send(res, 200, text, ctx.metrics.registry.contentType))
          .catch(fail);
        return;
      }
      send(res, 404, 'not found\n');
    } catch (err) {
      log.error('request failed', { route, ...errorFields(err) });
      fail();
    }
  });
}
