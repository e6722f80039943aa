/**
 * Closing the embedded database ends every connection and returns, even when pglite-socket's own
 * `stop()` never finishes (its handlers detach in the background, and Node's server close waits for
 * every accepted socket): a test file that closes its database must be able to exit.
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { waitFor } from '../../testkit/common/index.ts';
import { startEmbeddedDatabase } from './embedded.ts';

function openRaw(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const s = connect(Number(port), hostname, () => resolve(s));
    s.once('error', reject);
  });
}

const closed = (s: Socket) => new Promise<void>((resolve) => (s.closed ? resolve() : s.once('close', () => resolve())));

test('the accepted sockets are tracked (the pinned pglite-socket still keeps its server where close looks)', async () => {
  const db = await startEmbeddedDatabase();
  try {
    assert.ok(db.sockets, 'the socket server could not be tracked');
    const raw = await openRaw(db.url);
    raw.on('error', () => {});
    await waitFor('the server to accept the raw connection', () => db.sockets?.size === 1);
    await db.close();
    await closed(raw);
    await waitFor('the server side of the connection to close', () => db.sockets?.size === 0);
  } finally {
    await db.close();
  }
});

test('close returns and ends open connections when the socket server never stops', async () => {
  const db = await startEmbeddedDatabase({ closeStepMs: 200 });
  const realStop = PGLiteSocketServer.prototype.stop;
  let stuck: PGLiteSocketServer | undefined;
  // Models the stuck detach: stop() neither closes anything nor settles.
  PGLiteSocketServer.prototype.stop = function (this: PGLiteSocketServer) {
    stuck = this;
    return new Promise<void>(() => {});
  };
  let raw: Socket | undefined;
  try {
    raw = await openRaw(db.url);
    raw.on('error', () => {});
    await waitFor('the server to accept the raw connection', () => db.sockets?.size === 1);
    await db.close();
    await closed(raw);
    await waitFor('the server side of the connection to close', () => db.sockets?.size === 0);
  } finally {
    PGLiteSocketServer.prototype.stop = realStop;
    raw?.destroy();
    // The listener the stuck stop left open.
    if (stuck) await realStop.call(stuck);
  }
  assert.ok(stuck, 'close did not call the socket server stop');
});
