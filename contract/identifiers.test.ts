import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  compareUtf8,
  isDns1123Label,
  isEventId,
  isFullMxid,
  isHex64,
  isPartnerGroup,
  isRoomId,
} from './identifiers.ts';

describe('identifier grammars', () => {
  test('complete MXIDs', () => {
    for (const ok of [
      '@alice:org-a.example',
      '@a:b.c',
      '@slack-bob:org-a.example:8448',
      '@x=y/z+1:[::1]',
      '@bot:127.0.0.1:8008',
      '@a:[::ffff:192.0.2.1]:8448',
      '@a:[2001:DB8::1]',
      `@${'a'.repeat(240)}:org.example`,
    ])
      assert.ok(isFullMxid(ok), ok);
    for (const bad of [
      'alice',
      '@alice',
      'alice:org-a.example',
      '@:org-a.example',
      '@Alice:org-a.example',
      '@al ice:org-a.example',
      '@alice:',
      '@alice:org_a.example',
      '@alice:org-a.example:0',
      '@alice:org-a.example:65536',
      '@alice:-org.example',
      '@alice:999.1.1.1',
      `@${'a'.repeat(243)}:org.example`,
      '@ålice:org-a.example',
      // Bracketed forms that are not IPv6 addresses (the origin's CHECK refuses them too).
      '@a:[1.2.3.4]',
      '@a:[:::::]',
      '@a:[1::2:3:4:5:6:7:8]',
    ])
      assert.equal(isFullMxid(bad), false, bad);
  });
  test('room IDs: legacy and room-v12 domainless', () => {
    assert.ok(isRoomId('!room:org-a.example'));
    assert.ok(isRoomId('!AbC_-09:matrix.org'));
    assert.ok(isRoomId(`!${'A'.repeat(43)}`));
    for (const bad of [
      'room:org-a.example',
      '!:org-a.example',
      '!room',
      `!${'A'.repeat(42)}`,
      `!${'A'.repeat(44)}`,
      '!ro om:x.y',
    ])
      assert.equal(isRoomId(bad), false, bad);
  });
  test('event IDs', () => {
    assert.ok(isEventId('$event'));
    assert.ok(isEventId('$abc+/def:org-a.example'));
    for (const bad of ['event', '$', '$a b', `$${'e'.repeat(255)}`]) assert.equal(isEventId(bad), false, bad);
  });
  test('DNS-1123 labels, partner groups, hex ids', () => {
    assert.ok(isDns1123Label('kagent') && isDns1123Label('a') && isDns1123Label(`a${'b'.repeat(61)}c`));
    for (const bad of ['', 'A', '-a', 'a-', 'a.b', `a${'b'.repeat(62)}c`]) assert.equal(isDns1123Label(bad), false);
    assert.ok(isPartnerGroup('partner/org-b/docs'));
    for (const bad of [
      'partner/org-b',
      'partner/org-b/',
      'partner/Org/docs',
      'partners/org-b/docs',
      'partner/org-b/docs/x',
    ])
      assert.equal(isPartnerGroup(bad), false, bad);
    assert.ok(isHex64('a'.repeat(64)));
    assert.equal(isHex64('A'.repeat(64)), false);
  });
  test('UTF-8 byte order differs from UTF-16 order above the BMP', () => {
    // U+FB33 is one UTF-16 unit above the surrogates, but its UTF-8 bytes sort below U+1F600's.
    assert.ok(compareUtf8('\ufb33', '\u{1f600}') < 0);
    assert.ok('\ufb33' > '\u{1f600}');
  });
});

describe('utf8Length', () => {
  test('equals the TextEncoder byte count for any string', async () => {
    const { default: fc } = await import('fast-check');
    const { utf8Length } = await import('./identifiers.ts');
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => {
        assert.equal(utf8Length(s), new TextEncoder().encode(s).length);
      }),
      { numRuns: 3000 },
    );
    assert.equal(utf8Length('\ud800x'), new TextEncoder().encode('\ud800x').length);
    assert.equal(utf8Length('x\udc00'), new TextEncoder().encode('x\udc00').length);
  });
});
