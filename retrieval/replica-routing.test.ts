/**
 * Which endpoint serves a search and when a replica's answer may be used (retrieval/replicas.ts), and
 * how serve retrieval reads its replicas and pooler mode (retrieval/topology.ts: databaseTopology from
 * the flags and environment, startTopology with the configuration's `database` section).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { UsageError } from '../common/args.ts';
import { DEFAULT_REPLICA_SETTINGS } from '../rules/database.ts';
import { LOCAL_PROFILE } from './embeddings/local.ts';
import {
  afterCheck,
  afterSearchFailure,
  chooseEndpoint,
  DEFAULT_MAX_REPLICA_LAG_MS,
  keepSamples,
  parseLsn,
  provenAsOf,
  type ReplicaView,
  replicaAge,
  replicaTiming,
  UNCHECKED,
  withinBound,
} from './replicas.ts';
import { databaseTopology, startTopology } from './topology.ts';

const timing = replicaTiming(1000);
const fresh = (freshAsOfMs: number): ReplicaView => ({ down: false, freshAsOfMs });

describe('replica timing', () => {
  test('the default bound is 1 s, checked every 250 ms with 250 ms kept for the search', () => {
    assert.deepEqual(replicaTiming(), { maxLagMs: 1000, checkIntervalMs: 250, reserveMs: 250 });
    assert.equal(DEFAULT_MAX_REPLICA_LAG_MS, 1000);
  });
  test('a bound outside 100 ms–60 s or not an integer is refused', () => {
    for (const v of [99, 60_001, 1.5, Number.NaN]) assert.throws(() => replicaTiming(v), RangeError);
  });
});

describe('chooseEndpoint', () => {
  test('no replica: the primary, reason no_replica', () => {
    assert.deepEqual(chooseEndpoint([], 0, timing, 0), { endpoint: 'primary', reason: 'no_replica' });
  });
  test('a replica proven fresh within maxLag - reserve serves', () => {
    assert.deepEqual(chooseEndpoint([fresh(10_000)], 10_749, timing, 0), {
      endpoint: 'replica',
      index: 0,
      freshAsOfMs: 10_000,
    });
  });
  test('a replica whose proof is older than maxLag - reserve is passed over: replica_lag', () => {
    assert.deepEqual(chooseEndpoint([fresh(10_000)], 10_750, timing, 0), {
      endpoint: 'primary',
      reason: 'replica_lag',
    });
  });
  test('unchecked and down replicas are passed over, each with its reason', () => {
    assert.deepEqual(chooseEndpoint([UNCHECKED], 0, timing, 0), {
      endpoint: 'primary',
      reason: 'replica_unchecked',
    });
    assert.deepEqual(chooseEndpoint([{ down: true, freshAsOfMs: 5 }], 5, timing, 0), {
      endpoint: 'primary',
      reason: 'replica_down',
    });
  });
  test('turns are taken among the eligible replicas only', () => {
    const views = [fresh(1000), { down: true }, fresh(1100), fresh(0)];
    const picked = [0, 1, 2, 3].map((turn) => {
      const r = chooseEndpoint(views, 1200, timing, turn);
      return r.endpoint === 'replica' ? r.index : -1;
    });
    assert.deepEqual(picked, [0, 2, 0, 2]);
  });
});

describe('withinBound', () => {
  test('rows that arrived strictly before freshness + maxLag are used; later ones are not', () => {
    assert.equal(withinBound(1000, 1999, timing), true);
    assert.equal(withinBound(1000, 2000, timing), false);
  });
});

describe('afterCheck and provenAsOf', () => {
  test('LSN text parses as PostgreSQL orders it; anything else is undefined', () => {
    assert.equal(parseLsn('0/3018FD0'), 0x3018fd0n);
    assert.equal(parseLsn('1/0'), 1n << 32n);
    assert.ok((parseLsn('A/0') as bigint) > (parseLsn('9/FFFFFFFF') as bigint));
    for (const bad of [null, '', '0/', 'x/1', '0/3018FD0 ', 5]) assert.equal(parseLsn(bad), undefined);
  });
  test('fresh as of the newest sample whose position the replica has replayed', () => {
    const samples = [
      { startedMs: 0, lsn: 100n },
      { startedMs: 250, lsn: 200n },
      { startedMs: 500, lsn: 300n },
    ];
    assert.equal(provenAsOf(samples, 99n), undefined);
    assert.equal(provenAsOf(samples, 250n), 250);
    assert.equal(provenAsOf(samples, 300n), 500);
    assert.deepEqual(keepSamples(samples, 1250, timing), [{ startedMs: 500, lsn: 300n }]);
  });
  test('a proven standby is fresh as of the proof', () => {
    assert.deepEqual(afterCheck(UNCHECKED, { ok: true, standby: true, provenAsOfMs: 50 }), fresh(50));
  });
  test('a standby that is behind keeps the freshness an earlier check proved, and ages', () => {
    const v = afterCheck(fresh(50), { ok: true, standby: true });
    assert.deepEqual(v, fresh(50));
    assert.deepEqual(afterCheck(fresh(50), { ok: true, standby: true, provenAsOfMs: 20 }), fresh(50));
    assert.equal(replicaAge(v, 1050), 1000);
    assert.equal(chooseEndpoint([v], 1050, timing, 0).endpoint, 'primary');
  });
  test('fails closed: a failed check or a server that is not a standby forgets the freshness', () => {
    assert.deepEqual(afterCheck(fresh(50), { ok: false }), { down: true });
    assert.deepEqual(afterCheck(fresh(50), { ok: true, standby: false, provenAsOfMs: 300 }), { down: true });
    assert.equal(replicaAge({ down: true }, 0), Number.POSITIVE_INFINITY);
  });
  test('a down replica that is behind comes back unchecked, not with its old freshness', () => {
    assert.deepEqual(afterCheck({ down: true, freshAsOfMs: 50 }, { ok: true, standby: true }), {
      down: false,
    });
  });
  test('a failed search takes the replica out of rotation', () => {
    assert.deepEqual(afterSearchFailure(), { down: true });
  });
});

describe('databaseTopology', () => {
  const env = {};
  test('no replica, no pooler: the defaults', () => {
    assert.deepEqual(databaseTopology({}, env, true), {
      replicaUrls: [],
      maxReplicaLagMs: 1000,
      explicit: false,
    });
  });
  test('flags and DATABASE_REPLICA_URLS together; the bound and the pooler', () => {
    assert.deepEqual(
      databaseTopology(
        { 'replica-url': ['postgres://r1/db'], 'max-replica-lag': '500' },
        { DATABASE_REPLICA_URLS: 'postgresql://r2/db, postgres://r3/db', DATABASE_POOLER: 'transaction' },
        true,
      ),
      {
        replicaUrls: ['postgres://r1/db', 'postgresql://r2/db', 'postgres://r3/db'],
        maxReplicaLagMs: 500,
        pooler: 'transaction',
        explicit: true,
      },
    );
  });
  test('problems name the flag or the position, never the value', () => {
    const secret = 'http://user:hunter2@host/db';
    assert.throws(
      () => databaseTopology({ 'replica-url': [secret] }, env, true),
      (e: unknown) => e instanceof UsageError && !e.message.includes('hunter2') && /#1/.test(e.message),
    );
    assert.throws(() => databaseTopology({ 'replica-url': ['postgres://r/db'] }, env, false), UsageError);
    assert.throws(() => databaseTopology({ 'max-replica-lag': '50' }, env, true), UsageError);
    assert.throws(() => databaseTopology({ pooler: 'session' }, env, true), UsageError);
  });
});

describe('startTopology: the configuration or the flags, never both', () => {
  const configured = {
    replicaUrls: ['postgres://platform-pg-ro.postgres.svc/knowledge'],
    maxReplicaLagMilliseconds: 500,
    pooler: 'transaction' as const,
  };
  test("the configuration's database section, rendered from the RetrievalPlatform, is used as written", () => {
    assert.deepEqual(startTopology(databaseTopology({}, {}, true), configured, true), {
      replicaUrls: configured.replicaUrls,
      maxReplicaLagMs: 500,
      pooler: 'transaction',
    });
  });
  test('without a database section the flags and environment decide', () => {
    const flagged = databaseTopology({ 'replica-url': ['postgres://r1/db'] }, {}, true);
    assert.deepEqual(startTopology(flagged, DEFAULT_REPLICA_SETTINGS, true), {
      replicaUrls: ['postgres://r1/db'],
      maxReplicaLagMs: 1000,
    });
  });
  test('both sources, or a section without a primary, refuse to start', () => {
    for (const flagged of [
      databaseTopology({ 'replica-url': ['postgres://r1/db'] }, {}, true),
      databaseTopology({ 'max-replica-lag': '1000' }, {}, true),
      databaseTopology({}, { DATABASE_POOLER: 'transaction' }, true),
      databaseTopology({}, { DATABASE_POOLER: 'none' }, true),
    ])
      assert.throws(() => startTopology(flagged, configured, true), /not both/);
    assert.throws(() => startTopology(databaseTopology({}, {}, false), configured, false), /DATABASE_URL/);
  });
});

test('serve retrieval refuses a configuration with replicas when the flags name replicas too (exit 2, no URL echoed)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'replica-config-'));
  try {
    const config = join(dir, 'retrieval.json');
    writeFileSync(
      config,
      JSON.stringify({
        version: 1,
        agents: [{ namespace: 'kagent', name: 'knowledge-agent' }],
        embeddings: { profile: LOCAL_PROFILE },
        database: { replicaUrls: ['postgres://replica-host.invalid/knowledge'] },
      }),
    );
    const bin = join(import.meta.dirname, '..', 'bin', 'fgentic-retrieval.mjs');
    const run = (args: string[], env: Record<string, string>) =>
      spawnSync(process.execPath, [bin, 'serve', 'retrieval', '--config', config, '--port', '0', ...args], {
        encoding: 'utf8',
        env: { ...process.env, FGENTIC_LOG_LEVEL: 'silent', ...env },
        timeout: 60_000,
      });
    const both = run(['--replica-url', 'postgres://u:hunter2@other.invalid/db'], {
      DATABASE_URL: 'postgres://primary.invalid/knowledge',
    });
    assert.equal(both.status, 2, both.stderr);
    assert.match(both.stderr, /^serve retrieval: .*not both/m);
    assert.ok(!both.stderr.includes('hunter2') && !both.stderr.includes('replica-host'));
    const noPrimary = run([], { DATABASE_URL: '' });
    assert.equal(noPrimary.status, 2, noPrimary.stderr);
    assert.match(noPrimary.stderr, /needs DATABASE_URL/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
