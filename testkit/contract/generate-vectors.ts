/**
 * Writes contract/vectors/*.json: language-neutral conformance cases for the identity contract.
 * Inputs are built here; every expected verdict is stated here by hand from the ADR, never computed
 * by the decoder under test. Run: node --import tsx testkit/contract/generate-vectors.ts [--out-dir DIR]
 * (`scripts/vectors-fresh.test.ts` regenerates into a temporary folder and compares with the committed files).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { IDENTITY_HEADER_NAME } from '../../contract/carrier.ts';
import { jcs } from '../../contract/jcs.ts';
import {
  AGENT,
  EXP,
  encode,
  encodeText,
  IAT,
  matrixExample,
  NOW,
  oauthExample,
  roomContextExample,
  snapshotExample,
  withField,
} from './fixtures.ts';

type Expect = 'accept' | { reason: string };
interface Case {
  name: string;
  header: string | string[] | null;
  now: number;
  expect: Expect;
  decoded?: string;
}

const cases: Case[] = [];
const add = (name: string, header: Case['header'], expect: Expect, now = NOW) => {
  const c: Case = { name, header, now, expect };
  if (expect === 'accept' && typeof header === 'string') c.decoded = Buffer.from(header, 'base64url').toString('utf8');
  cases.push(c);
};

const m = matrixExample();
const o = oauthExample();
const bridgedCaller = {
  ...withField(m, 'kind', 'bridged_matrix'),
  network: 'slack',
  principal: '@slack-bob:org-a.example',
};

/** A Matrix projection padded with bridged audience members until its JCS is exactly `bytes` long. */
function padded(bytes: number): Record<string, unknown> {
  const base = structuredClone(m);
  const server = ':org-a.example';
  const fill = (k: number, localLen: number) => ({
    kind: 'bridged_matrix',
    network: `n${String(k).padStart(2, '0')}${'x'.repeat(60)}`,
    principal: `@p${String(k).padStart(2, '0')}${'x'.repeat(localLen - 3)}${server}`,
  });
  const pad = Array.from({ length: 14 }, (_, k) => fill(k, 255 - server.length - 1));
  const aud = base['audience'] as unknown[];
  base['audience'] = [...pad, ...aud]; // n.. networks sort before "slack"
  const room = base['room'] as Record<string, unknown>;
  room['id'] = `!${'r'.repeat(254 - server.length)}${server}`;
  room['event_id'] = `$${'e'.repeat(254)}`;
  const size = () => new TextEncoder().encode(jcs(base)).length;
  const over = size() - bytes;
  if (over < 0) throw new Error(`cannot pad to ${bytes}: ${size()}`);
  (base['audience'] as unknown[])[0] = fill(0, 255 - server.length - 1 - over);
  if (size() !== bytes) throw new Error('padding arithmetic failed');
  return base;
}

// --- accepted ---
add('matrix example from the ADR', encode(m), 'accept');
add('oauth example from the ADR', encode(o), 'accept');
add('bridged caller', encode(bridgedCaller), 'accept');
add('public-only classification', encode(withField(m, 'allowed_classifications', ['public'])), 'accept');
add('iat 30 s in the future is within skew', encode(m), 'accept', IAT - 30);
add('last second before exp', encode(m), 'accept', EXP - 1);
add('lifetime of exactly 1 s', encode(withField(m, 'exp', IAT + 1)), 'accept', IAT);
add('largest value: 6,144 decoded bytes, 8,192 encoded', encode(padded(6144)), 'accept');
add(
  'room-v12 domainless room id',
  encode(withField(m, 'room.id', '!abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ')),
  'accept',
);
add(
  'sixteen oauth groups',
  encode(
    withField(
      o,
      'groups',
      Array.from({ length: 16 }, (_, k) => `partner/org-b/g${String(k).padStart(2, '0')}`),
    ),
  ),
  'accept',
);

// --- carrier ---
add('missing header', null, { reason: 'missing' });
add('empty header value', '', { reason: 'missing' });
add('duplicate header values', [encode(m), encode(m)], { reason: 'duplicate' });
add('oversized: 8,193 bytes', `${encode(padded(6144))}A`, { reason: 'oversized' });
add(
  'base64 padding',
  `${encode(m)}==`.slice(0, encode(m).length + ((4 - (encode(m).length % 4)) % 4)) + (encode(m).length % 4 ? '' : '='),
  {
    reason: 'encoding',
  },
);
add('standard base64 alphabet', encode(m).replace(/_/g, '/').replace(/-/g, '+').replace(/^e/, '+'), {
  reason: 'encoding',
});
add('whitespace inside value', `${encode(m).slice(0, 10)} ${encode(m).slice(10)}`, { reason: 'encoding' });
add('non-zero trailing bits', Buffer.from('{"v":1}').toString('base64url').replace(/Q$/, 'R'), {
  reason: 'encoding',
});
add('invalid UTF-8', Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]).toString('base64url'), {
  reason: 'utf8',
});
add('duplicate JSON member name', encodeText(jcs(m).replace('{"agent":', '{"v":1,"agent":')), {
  reason: 'duplicate_name',
});
add('duplicate member name via escape', encodeText(jcs(m).replace('"v":1}', '"v":1,"\\u0076":1}')), {
  reason: 'duplicate_name',
});
add('non-canonical whitespace', encodeText(JSON.stringify(JSON.parse(jcs(m)), null, 1)), {
  reason: 'non_canonical',
});
add('non-canonical member order', encodeText(jcs(m).replace(/^\{(.*),"v":1\}$/, '{"v":1,$1}')), {
  reason: 'non_canonical',
});
add('non-canonical number 1.0', encodeText(jcs(m).replace('"v":1}', '"v":1.0}')), {
  reason: 'non_canonical',
});
add('non-canonical escape', encodeText(jcs(m).replace('"kagent"', '"kag\\u0065nt"')), {
  reason: 'non_canonical',
});
add('lone surrogate', encodeText(jcs(m).replace('"$event"', '"$ev\\ud800"')), { reason: 'json' });
add('trailing data', encodeText(`${jcs(m)}{}`), { reason: 'json' });
add('trailing whitespace', encodeText(`${jcs(m)} `), { reason: 'non_canonical' });
add('number overflow', encodeText(jcs(m).replace(`"iat":${IAT}`, '"iat":1e400')), { reason: 'json' });
add('top-level array', encode([m]), { reason: 'schema' });

// --- time ---
add('expired: now equals exp', encode(m), { reason: 'expired' }, EXP);
add('expired: after exp', encode(m), { reason: 'expired' }, EXP + 3600);
add('future iat beyond 30 s skew', encode(m), { reason: 'not_yet_valid' }, IAT - 31);
add('lifetime over 600 s', encode(withField(m, 'exp', IAT + 601)), { reason: 'lifetime' });
add('lifetime zero', encode(withField(m, 'exp', IAT)), { reason: 'lifetime' });
add('exp before iat', encode(withField(m, 'exp', IAT - 1)), { reason: 'lifetime' });
add('fractional iat', encode(withField(m, 'iat', IAT + 0.5)), { reason: 'schema' });
add('string exp', encode(withField(m, 'exp', String(EXP))), { reason: 'schema' });

// --- schema and kinds ---
add('version 2', encode(withField(m, 'v', 2)), { reason: 'version' });
add('unknown top-level field', encode({ ...m, jti: 'x' }), { reason: 'unknown_field' });
add('unknown field in room', encode(withField(m, 'room.version', '12')), { reason: 'unknown_field' });
add('unknown field in agent', encode(withField(m, 'agent.uid', 'x')), { reason: 'unknown_field' });
add('unknown kind', encode(withField(m, 'kind', 'user')), { reason: 'kind' });
add('mixed kinds: matrix with client', encode({ ...m, client: o['client'] }), { reason: 'mixed_kind' });
add('mixed kinds: oauth with audience', encode({ ...o, audience: m['audience'] }), { reason: 'mixed_kind' });
add('mixed kinds: oauth with room', encode({ ...o, room: m['room'] }), { reason: 'mixed_kind' });
add('mixed kinds: oauth with principal', encode({ ...o, principal: '@alice:org-a.example' }), {
  reason: 'mixed_kind',
});
add('mixed kinds: oauth with network', encode({ ...o, network: 'slack' }), { reason: 'mixed_kind' });
add('matrix kind with network', encode({ ...m, network: 'slack' }), { reason: 'network' });
add('bridged kind without network', encode(withField(m, 'kind', 'bridged_matrix')), { reason: 'network' });
add('bridged network not a DNS label', encode({ ...bridgedCaller, network: 'Slack_' }), {
  reason: 'network',
});
add('localpart-only MXID', encode(withField(m, 'principal', 'alice')), { reason: 'principal' });
add('MXID without server', encode(withField(m, 'principal', '@alice')), { reason: 'principal' });
add('MXID with uppercase localpart', encode(withField(m, 'principal', '@Alice:org-a.example')), {
  reason: 'principal',
});
add('MXID over 255 bytes', encode(withField(m, 'principal', `@${'a'.repeat(250)}:org-a.example`)), {
  reason: 'principal',
});
add('wrong agent', encode(withField(m, 'agent', { name: 'other-agent', namespace: 'kagent' })), {
  reason: 'agent_mismatch',
});
add('agent name not a DNS label', encode(withField(m, 'agent', { name: 'Knowledge', namespace: 'kagent' })), {
  reason: 'agent',
});

// --- classifications ---
add('classifications unsorted', encode(withField(m, 'allowed_classifications', ['public', 'approved_non_public'])), {
  reason: 'classifications',
});
add('classifications restricted', encode(withField(m, 'allowed_classifications', ['public', 'restricted'])), {
  reason: 'classifications',
});
add('classifications empty', encode(withField(m, 'allowed_classifications', [])), {
  reason: 'classifications',
});
add(
  'classifications approved_non_public alone',
  encode(withField(m, 'allowed_classifications', ['approved_non_public'])),
  { reason: 'classifications' },
);

// --- audience ---
const aud = m['audience'] as unknown[];
add('audience unsorted', encode(withField(m, 'audience', [aud[1], aud[0]])), { reason: 'audience' });
add('audience without the caller', encode(withField(m, 'audience', [aud[0]])), { reason: 'audience' });
add('audience empty', encode(withField(m, 'audience', [])), { reason: 'audience' });
add('audience duplicate entry', encode(withField(m, 'audience', [aud[0], aud[1], aud[1]])), {
  reason: 'audience',
});
add(
  'audience of 17',
  encode(
    withField(m, 'audience', [
      aud[0],
      aud[1],
      ...Array.from({ length: 15 }, (_, k) => ({
        kind: 'matrix',
        principal: `@z${k.toString().padStart(2, '0')}:org-a.example`,
      })),
    ]),
  ),
  { reason: 'audience' },
);
add(
  'audience entry with extra field',
  encode(withField(m, 'audience', [aud[0], { kind: 'matrix', principal: '@alice:org-a.example', event_id: '$x' }])),
  { reason: 'unknown_field' },
);
add(
  'audience entry bridge_service',
  encode(withField(m, 'audience', [aud[0], aud[1], { kind: 'matrix_service', principal: '@zz:org-a.example' }])),
  { reason: 'kind' },
);
add(
  'audience localpart-only member',
  encode(withField(m, 'audience', [aud[0], aud[1], { kind: 'matrix', principal: 'zed' }])),
  { reason: 'principal' },
);
add('matrix groups not empty', encode(withField(m, 'groups', ['partner/org-b/docs'])), { reason: 'groups' });

// --- room ---
add('room join rule public', encode(withField(m, 'room.join_rule', 'public')), { reason: 'room' });
add('room history shared', encode(withField(m, 'room.history_visibility', 'shared')), { reason: 'room' });
add('room state digest uppercase', encode(withField(m, 'room.state_sha256', 'A'.repeat(64))), {
  reason: 'room',
});
add('room id without sigil', encode(withField(m, 'room.id', 'room:org-a.example')), { reason: 'room' });
add('room event id without sigil', encode(withField(m, 'room.event_id', 'event')), { reason: 'room' });
add('delegation id uppercase', encode(withField(m, 'delegation_id', 'F'.repeat(64))), {
  reason: 'delegation_id',
});
add('delegation id short', encode(withField(m, 'delegation_id', 'f'.repeat(63))), {
  reason: 'delegation_id',
});

// --- oauth groups and client ---
add('oauth groups empty', encode(withField(o, 'groups', [])), { reason: 'groups' });
add('oauth foreign partner group', encode(withField(o, 'groups', ['partner/org-c/docs'])), {
  reason: 'groups',
});
add('oauth prefix-only group', encode(withField(o, 'groups', ['partner/org-b'])), { reason: 'groups' });
add('oauth local group', encode(withField(o, 'groups', ['staff'])), { reason: 'groups' });
add('oauth groups unsorted', encode(withField(o, 'groups', ['partner/org-b/wiki', 'partner/org-b/docs'])), {
  reason: 'groups',
});
add('oauth groups duplicate', encode(withField(o, 'groups', ['partner/org-b/docs', 'partner/org-b/docs'])), {
  reason: 'groups',
});
add(
  'oauth groups 17',
  encode(
    withField(
      o,
      'groups',
      Array.from({ length: 17 }, (_, k) => `partner/org-b/g${String(k).padStart(2, '0')}`),
    ),
  ),
  { reason: 'groups' },
);
add('oauth policy id not a DNS label', encode(withField(o, 'client.policy_id', 'Org_B')), {
  reason: 'client',
});
add('oauth issuer over 512 bytes', encode(withField(o, 'client.issuer', `https://${'i'.repeat(510)}`)), {
  reason: 'client',
});
add('oauth client extra field', encode(withField(o, 'client.sub', 'x')), { reason: 'unknown_field' });

const projection = {
  description: `${IDENTITY_HEADER_NAME} decode vectors (ADR 0017). Each case: header (null = absent, array = repeated values), now (Unix s), expected verdict. Consumers serve exactly the agents listed. On accept, decoded is the canonical JSON text.`,
  agents: [AGENT],
  cases,
};

// --- room context ---
const rc = roomContextExample();
const rcCases: Case[] = [];
const addRc = (name: string, header: Case['header'], expect: Expect) => {
  const c: Case = { name, header, now: NOW, expect };
  if (expect === 'accept' && typeof header === 'string') c.decoded = Buffer.from(header, 'base64url').toString('utf8');
  rcCases.push(c);
};
addRc('room context from the ADR example', encode(rc), 'accept');
addRc('room context missing', null, { reason: 'missing' });
addRc('room context duplicate', [encode(rc), encode(rc)], { reason: 'duplicate' });
addRc('room context extra field agent', encode({ ...rc, agent: AGENT }), { reason: 'unknown_field' });
addRc(
  'room context caller not in audience',
  encode(withField(rc, 'caller', { kind: 'matrix', principal: '@carol:org-a.example' })),
  {
    reason: 'audience',
  },
);
addRc('room context caller localpart only', encode(withField(rc, 'caller', { kind: 'matrix', principal: 'alice' })), {
  reason: 'principal',
});
addRc('room context widened classification', encode(withField(rc, 'allowed_classifications', ['public', 'secret'])), {
  reason: 'classifications',
});
addRc('room context non-canonical', encodeText(JSON.stringify(rc, null, 2)), { reason: 'non_canonical' });

const roomContext = {
  description: 'X-Fgentic-Room-Context decode vectors (same carrier rules; no time or agent binding).',
  cases: rcCases,
};

const snapshot = {
  description:
    'state_sha256 = lowercase SHA-256 of the snapshot JCS bytes, no trailing newline (docs/decisions.md#d1-state-digest). audience excludes bridge_service members and is sorted by UTF-8 bytes of (kind, network-or-empty, principal).',
  cases: [
    {
      name: 'ADR snapshot',
      snapshot: snapshotExample(),
      jcs_bytes: 661,
      state_sha256: '58e67efe5cd7f5ff2805eb0f35192ea90ef64244c896417b5504af8ad102be17',
      audience: [
        { kind: 'bridged_matrix', network: 'slack', principal: '@slack-bob:org-a.example' },
        { kind: 'matrix', principal: '@alice:org-a.example' },
      ],
    },
  ],
};

const attribution = {
  description: 'X-User-Id for OAuth callers: oidc:<policy_id>:<lowercase sha256 of JCS {issuer,audience,azp}>.',
  cases: [
    {
      name: 'ADR OAuth example',
      policy_id: 'org-b',
      identity: { audience: 'fgentic-a2a', azp: 'org-b-a2a', issuer: 'https://issuer.example' },
      identity_jcs: '{"audience":"fgentic-a2a","azp":"org-b-a2a","issuer":"https://issuer.example"}',
      x_user_id: 'oidc:org-b:15e6889a926b03308d688970505c517ecf6bdefe48f6f16ae1c9767ea95045b9',
    },
  ],
};

// RFC 8785 §3.2.2/§3.2.3/§3.2.4 and Appendix B examples, as stated in the RFC.
const jcsVectors = {
  description: 'RFC 8785 canonicalization examples: input JSON text → canonical text.',
  cases: [
    {
      name: 'RFC 8785 §3.2.4 sample',
      input:
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/", "literals": [null, true, false]}',
      canonical:
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    },
    {
      name: 'RFC 8785 §3.2.3 key sorting by UTF-16 code units',
      input:
        '{"\\u20ac": "Euro Sign", "\\r": "Carriage Return", "\\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One", "\\ud83d\\ude00": "Emoji: Grinning Face", "\\u0080": "Control", "\\u00f6": "Latin Small Letter O With Diaeresis"}',
      canonical:
        '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    },
    { name: 'RFC 8785 Appendix B: 0', input: '0', canonical: '0' },
    { name: 'RFC 8785 Appendix B: -0', input: '-0', canonical: '0' },
    { name: 'RFC 8785 Appendix B: 1e21', input: '1e21', canonical: '1e+21' },
    { name: 'RFC 8785 Appendix B: 1e-7', input: '1e-7', canonical: '1e-7' },
    {
      name: 'RFC 8785 Appendix B: 9007199254740992',
      input: '9007199254740992',
      canonical: '9007199254740992',
    },
    {
      name: 'RFC 8785 Appendix B: 295147905179352830000',
      input: '295147905179352830000',
      canonical: '295147905179352830000',
    },
    {
      name: 'RFC 8785 Appendix B: max double',
      input: '1.7976931348623157e308',
      canonical: '1.7976931348623157e+308',
    },
    { name: 'RFC 8785 Appendix B: min denormal', input: '5e-324', canonical: '5e-324' },
    { name: 'RFC 8785 Appendix B: 0.000001', input: '0.000001', canonical: '0.000001' },
  ],
};

const { values } = parseArgs({ options: { 'out-dir': { type: 'string' } } });
const dir = values['out-dir'] ?? join(import.meta.dirname, '../../contract/vectors');
const write = (name: string, data: unknown) =>
  writeFileSync(join(dir, name), `${JSON.stringify(data, null, 2)}\n`, 'utf8');
write('projection.json', projection);
write('room-context.json', roomContext);
write('snapshot.json', snapshot);
write('attribution.json', attribution);
write('jcs.json', jcsVectors);
process.stdout.write(`wrote ${cases.length} projection, ${rcCases.length} room-context cases\n`);
