/**
 * The one agent bound (rules/agent-bound.ts) holds for projector.json: the longest entry is measured
 * on what the render produces at the CRDs' maxima, a file with the most agents and every other field
 * at its maximum still fits the 1 MiB ConfigMap and is read, and one agent more is refused.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { render } from '../controller/render/index.ts';
import { PROJECTOR_CONFIGMAP, RETRIEVAL_CONFIGMAP } from '../controller/render/server-config.ts';
import {
  CONFIG_DATA_LIMIT,
  DNS1123_LABEL_MAX,
  LOCAL_GROUP_MAX,
  MAX_AGENTS,
  MAX_BRIDGED_ORIGINS,
  MAX_LOCAL_GROUPS,
  PROJECTOR_AGENT_ENTRY_BYTES,
  PROJECTOR_RESERVED_BYTES,
  RETRIEVAL_AGENT_ENTRY_BYTES,
} from '../rules/index.ts';
import { agent, examples, partner } from '../testkit/controller/fixtures.ts';
import { parseConfig } from './config.ts';
import { MAX_REGISTRY_SHARDS, shardName } from './registry.ts';

const label = (prefix: string, i: number, length = DNS1123_LABEL_MAX) =>
  `${prefix}${String(i).padStart(5, '0')}`.padEnd(length, 'x');
/** A 1,024-character anchored regex that JSON doubles: every `"` is written `\"`. */
const widestRegex = `^${'"'.repeat(1022)}$`;
const configData = (cm: { data?: Record<string, string> }) =>
  Object.entries(cm.data ?? {}).reduce((n, [k, v]) => n + Buffer.byteLength(k) + Buffer.byteLength(v), 0);

describe('projector.json agent bound', () => {
  it('the longest entries are what the render writes for 63-character namespace and name', () => {
    const input = examples();
    const ns = label('n', 0);
    const name = label('a', 0);
    input.agents = [agent(ns, name, { public: true })];
    input.partners = [partner('wide', { agents: [{ namespace: ns, name }] })];
    const { objects, conflicts } = render(input);
    assert.deepEqual(conflicts, []);
    const data = (n: string) =>
      JSON.parse(
        Object.values(
          (objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === n) as any).data as object,
        )[0] as string,
      );
    const projectorEntry = data(PROJECTOR_CONFIGMAP).agents[0];
    assert.ok(projectorEntry.publicPath, 'the public route is listed');
    assert.equal(JSON.stringify(projectorEntry).length + 1, PROJECTOR_AGENT_ENTRY_BYTES);
    assert.equal(JSON.stringify(data(RETRIEVAL_CONFIGMAP).agents[0]).length + 1, RETRIEVAL_AGENT_ENTRY_BYTES);
  });

  const worst = (agents: number) => ({
    version: 1,
    publicRetrievalTimeoutSeconds: 60,
    bridge: {
      workload: 'w'.repeat(DNS1123_LABEL_MAX),
      localServer: Array.from({ length: 4 }, () => 's'.repeat(63)).join('.'), // 255 characters
      serviceUserRegex: widestRegex,
      bridgedOrigins: Array.from({ length: MAX_BRIDGED_ORIGINS }, (_, i) => ({
        network: label('net', i),
        userIdRegex: widestRegex,
      })),
    },
    agents: Array.from({ length: agents }, (_, i) => {
      const [ns, name] = [label('n', i), label('a', i)];
      return { namespace: ns, name, localPath: `/api/a2a/${ns}/${name}`, publicPath: `/a2a/${ns}/${name}` };
    }),
    rooms: [],
    partners: [],
    localGroups: Array.from({ length: MAX_LOCAL_GROUPS }, (_, i) => label('g', i, LOCAL_GROUP_MAX)),
    liveRoomCheck: {
      enabled: true,
      homeserverUrl: `https://h.example/${'u'.repeat(2048 - 'https://h.example/'.length)}`,
      accessTokenFile: `/${'t'.repeat(4095)}`,
      timeoutMs: 10_000,
    },
    capability: 'ledger',
  });

  it('at the bound, with every other field at its maximum, it fits the ConfigMap and is read', () => {
    const config = worst(MAX_AGENTS);
    // The manifest of the most shards is part of the base file too (projector/registry.ts).
    const registry = {
      shards: Array.from({ length: MAX_REGISTRY_SHARDS }, (_, i) => ({
        name: shardName(i),
        sha256: 'f'.repeat(64),
      })),
    };
    const text = JSON.stringify({ ...config, registry });
    const bytes = configData({ data: { 'projector.json': text } });
    assert.ok(bytes <= CONFIG_DATA_LIMIT, `${bytes} bytes`);
    // Everything but the agents stays within the room kept for it.
    const rest = bytes - (JSON.stringify(config.agents).length - 1);
    assert.ok(rest <= PROJECTOR_RESERVED_BYTES, `${rest} bytes besides the agents`);
    const r = parseConfig(JSON.stringify(config));
    assert.ok(r.ok, r.ok ? '' : r.error);
    assert.equal(r.config.agents.length, MAX_AGENTS);
  });

  it('one agent over the bound is refused, not truncated', () => {
    const r = parseConfig(JSON.stringify(worst(MAX_AGENTS + 1)));
    assert.equal(r.ok, false);
    assert.deepEqual(r.ok ? [] : r.problems?.map((p) => `${p.path} ${p.reason}`), ['agents agent-limit']);
  });
});
