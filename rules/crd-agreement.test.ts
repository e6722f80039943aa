/**
 * The CRD schema (its pattern and its CEL, run by crds/validate.ts as the apiserver would) and the rule
 * modules decide alike on the same generated values, for every rule family the CRDs carry. The
 * contract's validators are the reference where they exist. Each property fails when one side alone
 * is changed (a pattern, a bound, a CEL rule or a validator).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { isTokenText } from '../contract/index.ts';
import { allCrds } from '../crds/schema.ts';
import { crValidator } from '../crds/validate.ts';
import { examples, partner, room } from '../testkit/controller/fixtures.ts';
import {
  checkCeiling,
  checkLocalGroups,
  checkPartnerGroups,
  isClientText,
  isIssuer,
  isRoomId,
  isServerName,
  isValidTimeoutSetting,
} from './index.ts';

const crds = crValidator(allCrds());
const accepts = (r: unknown) => crds.validate(r as Record<string, unknown>).length === 0;
const RUNS = { numRuns: 250 };

/**
 * Runs `check` (which returns the rule's decision after asserting agreement) on generated values and
 * asserts that both decisions occurred often enough, so no property passes on one-sided input.
 */
function agree<T>(arb: fc.Arbitrary<T>, check: (v: T) => boolean, numRuns = RUNS.numRuns): void {
  const seen = { valid: 0, invalid: 0 };
  fc.assert(
    fc.property(arb, (v) => {
      seen[check(v) ? 'valid' : 'invalid']++;
    }),
    { numRuns },
  );
  const least = Math.floor(numRuns / 20);
  assert.ok(seen.valid >= least && seen.invalid >= least, `one-sided input: ${JSON.stringify(seen)}`);
}

const ascii = (chars: string) => fc.constantFrom(...chars.split(''));
/** Strings near the boundaries of the identifier rules: printable ASCII, space, controls, non-ASCII. */
const clientish = fc.oneof(
  fc.string({ unit: 'grapheme-ascii', minLength: 0, maxLength: 20 }),
  fc.string({ unit: fc.constantFrom('a', 'Z', '~', '!', ' ', '\t', '\x7f', 'é', '😀', ':'), maxLength: 12 }),
  fc.string({ unit: ascii('ab~'), minLength: 250, maxLength: 260 }),
);

function platform(patch: (spec: Record<string, any>) => void) {
  const p = structuredClone(examples().platforms[0]) as any;
  patch(p.spec);
  return p;
}

describe('PartnerClient audience and azp: CRD = rules = contract', () => {
  for (const field of ['audience', 'azp'] as const)
    it(`${field}: the CRD admits exactly what the projection can carry`, () =>
      agree(clientish, (v) => {
        const rule = isClientText(v);
        assert.equal(rule, isTokenText(v, 255), 'rule vs contract');
        assert.equal(accepts(partner('p', { [field]: v })), rule, JSON.stringify(v));
        return rule;
      }));
});

describe('issuer: CRD = rules, and within what the contract carries', () => {
  const issuerish = fc.oneof(
    fc
      .tuple(
        fc.constantFrom('https://', 'https://', 'http://', 'https:/', 'HTTPS://', ''),
        fc.string({
          unit: fc.constantFrom('a', 'a', '.', '-', '/', '?', '#', '@', ' ', 'é', ':', '%', '"'),
          maxLength: 10,
        }),
      )
      .map(([s, r]) => s + r),
    fc.string({ unit: ascii('ab/'), minLength: 500, maxLength: 510 }).map((r) => `https://${r}`),
  );
  it('PartnerClient.spec.issuer and RetrievalPlatform.spec.jwt.issuer', () =>
    agree(issuerish, (v) => {
      const rule = isIssuer(v);
      if (rule) assert.ok(isTokenText(v, 512), 'an issuer the rule admits is one the contract carries');
      assert.equal(accepts(partner('p', { issuer: v })), rule, JSON.stringify(v));
      assert.equal(accepts(platform((s) => (s.jwt = { ...s.jwt, issuer: v }))), rule, JSON.stringify(v));
      return rule;
    }));
});

/** Server names around every branch of the grammar: DNS, IPv4, IPv6, ports, and near misses. */
const octet = fc.oneof(fc.integer({ min: 0, max: 300 }).map(String), fc.constantFrom('01', '00', ''));
const hex = fc.oneof(
  fc.integer({ min: 0, max: 0xfffff }).map((n) => n.toString(16)),
  fc.constantFrom('', 'g', 'FFFF'),
);
const label = fc.oneof(
  fc.string({ unit: ascii('a1-'), minLength: 0, maxLength: 5 }),
  fc.string({ unit: ascii('a1-'), minLength: 62, maxLength: 65 }),
  fc.constantFrom('Example', 'x_y', 'é'),
);
const host = fc.oneof(
  fc.domain(),
  fc.ipV4(),
  fc.ipV6().map((a) => `[${a}]`),
  fc.array(label, { minLength: 1, maxLength: 4 }).map((ls) => ls.join('.')),
  fc.array(octet, { minLength: 3, maxLength: 5 }).map((os) => os.join('.')),
  fc.array(hex, { minLength: 1, maxLength: 9 }).map((hs) => `[${hs.join(':')}]`),
  fc
    .tuple(fc.array(hex, { maxLength: 4 }), fc.array(hex, { maxLength: 4 }))
    .map(([a, b]) => `[${a.join(':')}::${b.join(':')}]`),
  fc.tuple(fc.array(hex, { maxLength: 6 }), octet, octet).map(([a, x, y]) => `[${a.join(':')}::${x}.${y}.1.2]`),
  fc.integer({ min: 0, max: 99999 }).map(String),
);
const port = fc.oneof(
  fc.constant(''),
  fc.constant(''),
  fc.integer({ min: 1, max: 65535 }).map((n) => `:${n}`),
  fc.integer({ min: 0, max: 70000 }).map((n) => `:${n}`),
  fc.constantFrom(':', ':00080', ':000000', ':0', ':65535', ':65536', ':00001'),
);
const serverName = fc.tuple(host, port).map(([h, p]) => h + p);

describe('Matrix names: CRD pattern + CEL = contract validators', () => {
  it('RetrievalPlatform.spec.bridge.localServer = isServerName', () =>
    agree(
      serverName,
      (v) => {
        const rule = isServerName(v) && v.length <= 255;
        assert.equal(accepts(platform((s) => (s.bridge.localServer = v))), rule, JSON.stringify(v));
        return rule;
      },
      400,
    ));
  it('RetrievalRoom.spec.roomId = isRoomId', () => {
    const roomId = fc.oneof(
      fc
        .tuple(
          fc.string({
            unit: fc.constantFrom('a', 'a', 'a', 'a', 'a', '!', ':', ' ', 'é', '~'),
            maxLength: 5,
          }),
          serverName,
        )
        .map(([o, s]) => `!${o}:${s}`),
      fc
        .tuple(
          fc.string({ unit: fc.constantFrom('A', 'z', '0', '_', '-'), minLength: 43, maxLength: 43 }),
          fc.constantFrom('', '', '', '+', '/', 'A', ':'),
          fc.nat(43),
        )
        .map(([s, c, i]) => `!${s.slice(0, i)}${c}${s.slice(i + (c === 'A' ? 0 : 1))}`),
      fc.string({ unit: ascii('a:!'), maxLength: 8 }),
      serverName.map((s) => `!${'o'.repeat(240)}:${s}`),
      // Mostly valid arms, so both decisions stay frequent for every seed (the arms above are mostly invalid).
      fc
        .tuple(
          fc.string({ unit: fc.constantFrom('a', 'B', '3', '_'), minLength: 1, maxLength: 6 }),
          fc.constantFrom('example.org', 'hs.example.org:8448', '10.0.0.1', '[::1]:443', 'a'),
        )
        .map(([o, s]) => `!${o}:${s}`),
      fc.string({ unit: fc.constantFrom('A', 'z', '0', '_', '-'), minLength: 43, maxLength: 43 }).map((s) => `!${s}`),
    );
    agree(
      roomId,
      (v) => {
        const rule = isRoomId(v);
        assert.equal(accepts(room('r', v)), rule, JSON.stringify(v));
        return rule;
      },
      400,
    );
  });
});

describe('groups: CRD = rules', () => {
  const segment = fc.oneof(
    fc.constantFrom('org-x', 'org-x', 'docs', 'org-y', '', '-a', 'A', 'a_b'),
    fc.string({ unit: ascii('a-'), maxLength: 4 }),
  );
  const group = fc
    .tuple(
      fc.constantFrom('partner/', 'partner/', 'partners/', ''),
      segment,
      fc.constantFrom('/', '/', '//', ''),
      segment,
    )
    .map((t) => t.join(''));
  it('PartnerClient.spec.groups (pattern, count, set, policy CEL) = checkPartnerGroups', () =>
    agree(
      fc.tuple(
        fc.oneof(
          fc.array(group, { maxLength: 3 }),
          fc.array(fc.constantFrom('partner/org-x/a', 'partner/org-x/b', 'partner/org-x/c'), {
            maxLength: 18,
          }),
          // Mostly valid (with policy org-x), so both decisions stay frequent for every seed.
          fc.uniqueArray(fc.constantFrom('partner/org-x/a', 'partner/org-x/docs', 'partner/org-x/b-1'), {
            minLength: 1,
            maxLength: 3,
          }),
        ),
        fc.constantFrom('org-x', 'org-x', 'org-y'),
      ),
      ([groups, policyId]) => {
        const rule = checkPartnerGroups(groups, policyId, 'spec.groups').length === 0;
        assert.equal(accepts(partner('p', { groups, policyId })), rule, JSON.stringify({ groups, policyId }));
        return rule;
      },
    ));
  it('RetrievalPlatform.spec.localGroups = checkLocalGroups', () => {
    const local = fc.oneof(
      group,
      fc.string({ unit: ascii('ab./-_A'), maxLength: 6 }),
      fc.string({ unit: ascii('a'), minLength: 127, maxLength: 130 }),
    );
    agree(fc.array(local, { maxLength: 3 }), (groups) => {
      const rule = checkLocalGroups(groups, 'spec.localGroups').length === 0;
      assert.equal(accepts(platform((s) => (s.localGroups = groups))), rule, JSON.stringify(groups));
      return rule;
    });
  });
});

describe('classification ceiling and agreementRef: CRD = rules', () => {
  it('RetrievalRoom and PartnerClient', () => {
    const ceiling = fc.oneof(
      fc.constantFrom(undefined, ['public'], ['approved_non_public', 'public']),
      fc.array(fc.constantFrom('public', 'approved_non_public', 'secret'), { maxLength: 3 }),
    );
    const ref = fc.constantFrom(undefined, undefined, '', 'dpa-2026', 'x'.repeat(253), 'x'.repeat(254));
    agree(fc.tuple(ceiling, ref), ([allowedClassifications, agreementRef]) => {
      const rule = checkCeiling(allowedClassifications, agreementRef).length === 0;
      const patch: Record<string, unknown> = {};
      if (allowedClassifications !== undefined) patch['allowedClassifications'] = allowedClassifications;
      if (agreementRef !== undefined) patch['agreementRef'] = agreementRef;
      const r = room('r', '!r:org-a.example') as any;
      delete r.spec.allowedClassifications;
      const p = partner('p') as any;
      delete p.spec.allowedClassifications;
      const what = JSON.stringify(patch);
      assert.equal(accepts({ ...r, spec: { ...r.spec, ...patch } }), rule, what);
      assert.equal(accepts({ ...p, spec: { ...p.spec, ...patch } }), rule, what);
      return rule;
    });
  });
});

describe('public timeout: CRD = rules', () => {
  it('RetrievalPlatform.spec.publicRetrievalTimeoutSeconds', () =>
    agree(fc.oneof(fc.integer({ min: -3, max: 70 }), fc.constantFrom(1.5, 59.9)), (t) => {
      const rule = isValidTimeoutSetting(t);
      assert.equal(accepts(platform((s) => (s.publicRetrievalTimeoutSeconds = t))), rule, String(t));
      return rule;
    }));
});
