/**
 * A loopback TCP proxy that injects connection faults between a client and a server it does not
 * change: `down()` closes the listener and resets every open connection (a database restart or a
 * network partition as the client sees it: ECONNREFUSED for new connections, ECONNRESET for pooled
 * ones), `up()` listens again on the same port, and `delayMs` holds every forwarded chunk in both
 * directions (a slow network or an overloaded server). Used by the soak for the database socket.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export class FaultProxy {
  delayMs = 0;
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  get url(): string {
    return `127.0.0.1:${this.port}`;
  }

  async up(): Promise<void> {
    if (this.server) return;
    const server = createServer((client) => this.pipe(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.port = (server.address() as { port: number }).port;
    this.server = server;
  }

  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.resetAndDestroy();
    this.sockets.clear();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private pipe(client: Socket): void {
    const upstream = connect(this.targetPort, this.targetHost);
    this.sockets.add(client);
    this.sockets.add(upstream);
    const forward = (from: Socket, to: Socket) => {
      from.on('data', (chunk: Buffer) => {
        if (this.delayMs <= 0) {
          to.write(chunk);
          return;
        }
        // Hold the chunk; pause the source so ordering and back-pressure are kept.
        from.pause();
        setTimeout(() => {
          if (!to.destroyed) to.write(chunk);
          from.resume();
        }, this.delayMs);
      });
    };
    forward(client, upstream);
    forward(upstream, client);
    const end = () => {
      this.sockets.delete(client);
      this.sockets.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end);
    upstream.on('close', end);
    client.on('error', end);
    upstream.on('error', end);
  }
}
