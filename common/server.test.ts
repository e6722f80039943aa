/** The server kit: a busy port rejects, probes answer by readiness, draining turns not ready for good. */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, test } from 'node:test';
import { Registry } from 'prom-client';
import { answerOps, listen, Readiness, sampledGauge, urlOf } from './server.ts';

const registry = new Registry();
let ok = true;
const readiness = new Readiness(() => ok);
sampledGauge(registry, 'kit_test_age_seconds', 'test gauge', () => Number.POSITIVE_INFINITY);
const server = createServer((req, res) => {
  if (!answerOps(res, req.url ?? '', { registry, ready: () => readiness.ready() })) res.writeHead(404).end();
});
const address = await listen(server, 0, '127.0.0.1');
const base = urlOf(address);
after(() => server.close());

test('a port in use rejects instead of emitting', async () => {
  const other = createServer();
  await assert.rejects(listen(other, address.port, '127.0.0.1'), /EADDRINUSE/);
});

test('probes follow readiness, and draining is final', async () => {
  assert.equal((await fetch(`${base}/healthz`)).status, 200);
  assert.equal((await fetch(`${base}/readyz`)).status, 200);
  ok = false;
  assert.equal((await fetch(`${base}/readyz`)).status, 503);
  ok = true;
  readiness.drain();
  const r = await fetch(`${base}/readyz`);
  assert.equal(r.status, 503);
  assert.equal(await r.text(), 'not ready');
  assert.equal((await fetch(`${base}/healthz`)).status, 200);
  assert.equal((await fetch(`${base}/other`)).status, 404);
});

test('a sampled gauge exports a non-finite reading as -1', async () => {
  const text = await (await fetch(`${base}/metrics`)).text();
  assert.match(text, /^kit_test_age_seconds -1$/m);
});
