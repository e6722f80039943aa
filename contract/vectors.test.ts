/** Runs the language-neutral vectors in contract/vectors: one named test per case. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import {
  audienceFromSnapshot,
  decodeProjection,
  decodeRoomContext,
  jcs,
  oauthUserId,
  parseStrictJson,
  stateDigest,
  validateSnapshot,
} from './index.ts';

interface Case {
  name: string;
  header: string | string[] | null;
  now: number;
  expect: 'accept' | { reason: string };
  decoded?: string;
}
const load = (name: string) => JSON.parse(readFileSync(new URL(`./vectors/${name}`, import.meta.url), 'utf8'));

describe('projection vectors (X-Fgentic-Identity)', () => {
  const v = load('projection.json') as { agents: { name: string; namespace: string }[]; cases: Case[] };
  for (const c of v.cases) {
    test(c.name, () => {
      const verdict = decodeProjection(c.header, { now: c.now, agents: v.agents });
      if (c.expect === 'accept') {
        assert.ok(verdict.ok, `expected accept, got ${verdict.ok ? '' : verdict.reason}`);
        assert.equal(jcs(verdict.value), c.decoded);
      } else {
        assert.equal(verdict.ok, false);
        assert.equal(verdict.ok ? undefined : verdict.reason, c.expect.reason);
      }
    });
  }
});

describe('room-context vectors (X-Fgentic-Room-Context)', () => {
  for (const c of (load('room-context.json') as { cases: Case[] }).cases) {
    test(c.name, () => {
      const verdict = decodeRoomContext(c.header);
      if (c.expect === 'accept') {
        assert.ok(verdict.ok);
        assert.equal(jcs(verdict.value), c.decoded);
      } else {
        assert.equal(verdict.ok ? 'accept' : verdict.reason, c.expect.reason);
      }
    });
  }
});

describe('snapshot vectors', () => {
  for (const c of load('snapshot.json').cases) {
    test(`${c.name}: digest and audience`, () => {
      const s = validateSnapshot(c.snapshot);
      assert.ok(s.ok);
      assert.equal(new TextEncoder().encode(jcs(s.value)).length, c.jcs_bytes);
      assert.equal(stateDigest(s.value), c.state_sha256);
      assert.deepEqual(audienceFromSnapshot(s.value), c.audience);
    });
  }
});

describe('attribution vectors', () => {
  for (const c of load('attribution.json').cases) {
    test(c.name, () => {
      assert.equal(jcs(c.identity), c.identity_jcs);
      assert.equal(oauthUserId(c.policy_id, c.identity), c.x_user_id);
    });
  }
});

describe('RFC 8785 vectors', () => {
  for (const c of load('jcs.json').cases) {
    test(c.name, () => {
      const parsed = parseStrictJson(c.input);
      assert.ok(parsed.ok);
      assert.equal(jcs(parsed.value), c.canonical);
    });
  }
});
