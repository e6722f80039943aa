/**
 * Graceful shutdown of the three servers, each in its own child process through the real CLI: on
 * SIGTERM /readyz turns 503 first, then the listener closes, a request that was in flight (its body
 * still uploading) is answered in full, and the process exits 0; a request still open when the drain
 * timeout expires is cut and the process exits within the bound.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect as netConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { connect as tlsConnect } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { hasOpenssl, makeSelfSignedCert } from '../common/dev-tls.ts';
import { DEFAULT_SHUTDOWN, MAX_SHUTDOWN_MS, shutdownTimingFromEnv } from '../common/shutdown.ts';
import { LOCAL_PROFILE } from '../retrieval/embeddings/local.ts';
import { waitFor } from '../testkit/common/index.ts';
import { configJson, localRequest } from '../testkit/projector/fixtures.ts';
import { AGENT } from '../testkit/retrieval.ts';
import { admissionReview, CONTROLLER, platform, retrievalAgent, retrievalAgentCr } from '../testkit/webhook.ts';

const CLI = fileURLToPath(new URL('../cli/main.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'fgentic-shutdown-'));
after(() => rmSync(dir, { recursive: true, force: true }));

interface Child {
  readonly proc: ChildProcess;
  readonly port: number;
  readonly exited: Promise<number | null>;
  /** Everything the child wrote so far (stdout and stderr). */
  output(): string;
}

/** Start `fgentic-retrieval <args>` and wait for the port it prints or logs. */
function startChild(args: string[], portPattern: RegExp, env: Record<string, string>): Promise<Child> {
  const proc = spawn(process.execPath, ['--import', 'tsx', CLI, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, FGENTIC_LOG_LEVEL: 'info', ...env },
  });
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  return new Promise((resolve, reject) => {
    let out = '';
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = portPattern.exec(out);
      if (m) resolve({ proc, port: Number(m[1]), exited, output: () => out });
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', onData);
    proc.once('exit', (code) => reject(new Error(`exited early (${code})`)));
  });
}

interface Transport {
  readonly tls: boolean;
  readonly port: number;
}

function open(t: Transport): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = t.tls
      ? tlsConnect({ host: '127.0.0.1', port: t.port, rejectUnauthorized: false }, () => resolve(s))
      : netConnect({ host: '127.0.0.1', port: t.port }, () => resolve(s));
    s.once('error', reject);
  });
}

/** Everything the server sends until it closes the connection. */
function collect(s: Socket): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    s.on('data', (d: Buffer) => {
      text += d.toString('latin1');
    });
    s.on('error', () => resolve(text));
    s.on('close', () => resolve(text));
  });
}

async function readyStatus(t: Transport): Promise<number | 'refused'> {
  let s: Socket;
  try {
    s = await open(t);
  } catch {
    return 'refused';
  }
  const reply = collect(s);
  s.write('GET /readyz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n');
  const m = /^HTTP\/1\.1 (\d{3})/.exec(await reply);
  return m ? Number(m[1]) : 'refused';
}

async function waitReady(t: Transport): Promise<void> {
  await waitFor('/readyz to answer 200', async () => (await readyStatus(t)) === 200, {
    timeoutMs: 30_000,
    intervalMs: 50,
  });
}

interface Slow {
  /** Request head; the body's first part is sent at once, the rest by `finish`. */
  readonly head: string;
  readonly first: string;
  readonly rest: string;
}

const DELAY_MS = 600;
const TIMEOUT_MS = 4_000;

/** SIGTERM with a request in flight; its body completes only after the listener has closed. */
async function drainsInFlight(child: Child, t: Transport, slow: Slow): Promise<string> {
  const s = await open(t);
  const reply = collect(s);
  s.write(slow.head + slow.first);
  // A readiness answer on a later connection shows the server has taken this one in.
  await waitReady(t);
  child.proc.kill('SIGTERM');
  // The first state after "ready" must be "not ready" with the listener still open; only then closed.
  const next = await waitFor(
    '/readyz to stop answering 200',
    async () => {
      const status = await readyStatus(t);
      return status === 200 ? undefined : { status };
    },
    { timeoutMs: 30_000, intervalMs: 10 },
  );
  assert.equal(next.status, 503, 'the listener closed without a not-ready phase');
  await waitFor('the listener to close', async () => (await readyStatus(t)) === 'refused', {
    timeoutMs: 30_000,
    intervalMs: 20,
  });
  s.write(slow.rest);
  const text = await reply;
  assert.equal(await child.exited, 0);
  return text;
}

const env = (timeoutMs = TIMEOUT_MS) => ({
  FGENTIC_SHUTDOWN_DELAY_MS: String(DELAY_MS),
  FGENTIC_SHUTDOWN_TIMEOUT_MS: String(timeoutMs),
});

function projectorConfig(): string {
  const file = join(dir, 'projector.json');
  writeFileSync(file, JSON.stringify(configJson()));
  return file;
}

/** The check agentgateway sends, with an empty chunked body that the projector waits for. */
function projectorSlow(): Slow {
  const req = localRequest();
  const lines = [`${req.method} ${req.path} HTTP/1.1`, 'host: localhost', 'transfer-encoding: chunked'];
  for (const [k, vs] of Object.entries(req.headers))
    if (k !== 'host') for (const v of vs ?? []) lines.push(`${k}: ${v}`);
  return { head: `${lines.join('\r\n')}\r\n\r\n`, first: '', rest: '0\r\n\r\n' };
}

function jsonSlow(path: string, body: string, headers: string[] = []): Slow {
  const head = [
    `POST ${path} HTTP/1.1`,
    'host: localhost',
    'content-type: application/json',
    'accept: application/json, text/event-stream',
    `content-length: ${Buffer.byteLength(body)}`,
    ...headers,
  ].join('\r\n');
  const cut = Math.floor(body.length / 2);
  return { head: `${head}\r\n\r\n`, first: body.slice(0, cut), rest: body.slice(cut) };
}

describe('graceful shutdown on SIGTERM (child processes)', () => {
  test('projector: not ready, listener closed, the in-flight check is answered, exit 0', async () => {
    const child = await startChild(
      ['serve', 'projector', '--config', projectorConfig(), '--port', '0', '--host', '127.0.0.1'],
      /projector listening on http:\/\/127\.0\.0\.1:(\d+)/,
      env(),
    );
    const t = { tls: false, port: child.port };
    await waitReady(t);
    const text = await drainsInFlight(child, t, projectorSlow());
    assert.match(text, /^HTTP\/1\.1 200 /);
    assert.match(text, /x-fgentic-identity: /);
  });

  test('projector: a request still open at the drain timeout is cut and the process exits in time', async () => {
    const child = await startChild(
      ['serve', 'projector', '--config', projectorConfig(), '--port', '0', '--host', '127.0.0.1'],
      /projector listening on http:\/\/127\.0\.0\.1:(\d+)/,
      env(300),
    );
    const t = { tls: false, port: child.port };
    await waitReady(t);
    const s = await open(t);
    const reply = collect(s);
    s.write(projectorSlow().head); // the body never ends
    child.proc.kill('SIGTERM');
    assert.equal(await reply, '', 'a response was sent for an unfinished request');
    assert.equal(await child.exited, 0);
    // The drain ended by its timeout (the connection was cut), not by the request finishing.
    assert.match(child.output(), /"msg":"stopped","forced":true/);
  });

  test('retrieval: the in-flight MCP request is answered after the listener closed, exit 0', async () => {
    const config = join(dir, 'retrieval.json');
    writeFileSync(config, JSON.stringify({ version: 1, agents: [AGENT], embeddings: { profile: LOCAL_PROFILE } }));
    const child = await startChild(
      ['serve', 'retrieval', '--config', config, '--port', '0', '--host', '127.0.0.1', '--data-dir', 'memory'],
      /retrieval listening on http:\/\/127\.0\.0\.1:(\d+)/,
      env(),
    );
    const t = { tls: false, port: child.port };
    await waitReady(t);
    const body = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list' });
    const text = await drainsInFlight(child, t, jsonSlow('/mcp', body, ['mcp-protocol-version: 2025-11-25']));
    assert.match(text, /^HTTP\/1\.1 200 /);
    assert.match(text, /"search_knowledge"/);
  });

  test('webhook: the in-flight review is answered after the listener closed, exit 0', {
    skip: hasOpenssl() ? false : 'openssl CLI not found',
  }, async () => {
    const certDir = join(dir, 'tls');
    makeSelfSignedCert(certDir);
    writeFileSync(join(dir, 'cluster.yaml'), [platform(), retrievalAgentCr()].map((o) => stringify(o)).join('---\n'));
    writeFileSync(join(dir, 'webhook.json'), JSON.stringify({ offlineObjects: [join(dir, 'cluster.yaml')] }));
    const child = await startChild(
      ['serve', 'webhook', '--config', join(dir, 'webhook.json'), '--cert-dir', certDir, '--port', '0'],
      /"msg":"webhook listening","port":(\d+)/,
      env(),
    );
    const t = { tls: true, port: child.port };
    await waitReady(t);
    const review = JSON.stringify(admissionReview(retrievalAgent(), { user: CONTROLLER, uid: 'drain-1' }));
    const text = await drainsInFlight(child, t, jsonSlow('/validate', review));
    assert.match(text, /^HTTP\/1\.1 200 /);
    assert.match(text, /"uid":"drain-1"/);
  });
});

describe('shutdown timing from the environment', () => {
  test('defaults, valid values, malformed values fall back, and the sum stays under the grace period', () => {
    assert.deepEqual(shutdownTimingFromEnv({}), DEFAULT_SHUTDOWN);
    assert.deepEqual(shutdownTimingFromEnv({ FGENTIC_SHUTDOWN_DELAY_MS: '0', FGENTIC_SHUTDOWN_TIMEOUT_MS: '1500' }), {
      delayMs: 0,
      timeoutMs: 1500,
    });
    for (const bad of ['-1', '1.5', 'soon', '25001', ' '])
      assert.deepEqual(shutdownTimingFromEnv({ FGENTIC_SHUTDOWN_DELAY_MS: bad }), DEFAULT_SHUTDOWN, bad);
    const capped = shutdownTimingFromEnv({
      FGENTIC_SHUTDOWN_DELAY_MS: '10000',
      FGENTIC_SHUTDOWN_TIMEOUT_MS: '25000',
    });
    assert.deepEqual(capped, { delayMs: 10_000, timeoutMs: MAX_SHUTDOWN_MS - 10_000 });
    // deploy/base grants 30 s before SIGKILL.
    assert.ok(MAX_SHUTDOWN_MS < 30_000);
  });
});
