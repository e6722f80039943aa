/**
 * Test-only fast-check generators of field values near the boundaries of the rules in rules/: URLs,
 * embedding profiles and models, DNS labels, label maps, ports and free text. Mostly-valid arms keep
 * both verdicts frequent; the near misses are the cases that once passed one layer and failed
 * another (a port above 65535, a host ending in a number, an underscore in a profile, a 256-character
 * model, astral characters counted twice).
 */
import fc from 'fast-check';

const pick = (chars: string) => fc.constantFrom(...chars.split(''));

const validHost = fc.oneof(
  fc.constantFrom(
    'synapse.matrix.svc.cluster.local',
    'agentgateway-proxy.agentgateway-system.svc.cluster.local',
    'example.org',
    'h',
    'Example.ORG',
    '10.0.0.1',
    '[::1]',
    '[2001:db8::8a2e:370:7334]',
  ),
  fc.domain(),
  fc.ipV4(),
  fc.ipV6().map((a) => `[${a}]`),
);
const nearMissHost = fc.constantFrom(
  '999.1.1.1',
  '1.2.3',
  '0x7f.1',
  '01.2.3.4',
  '256.0.0.1',
  '1.2.3.4.5',
  'a.123',
  'a.0x1',
  '9',
  '-a',
  'a-',
  'a_b',
  'a..b',
  '',
  'ex ample',
  'é.example',
  'user@h',
  'user:pw@h',
  '[::1',
  '[::g]',
  'x'.repeat(64),
);
const urlPort = fc.oneof(
  fc.constant(''),
  fc.constant(''),
  fc.integer({ min: 1, max: 65535 }).map((n) => `:${n}`),
  fc.integer({ min: 0, max: 140000 }).map((n) => `:${n}`),
  fc.constantFrom(':', ':99999', ':00080', ':65535', ':65536', ':0', ':8a'),
);
const urlPath = fc.oneof(
  fc.constant(''),
  fc.constantFrom('/', '/v1/embeddings', '/_matrix', "/~!$&'()*+,;=:@-._", '/%41', '/a%zz'),
  fc.constantFrom('/a b', '/a?x=1', '/a#f', '/é', '/a\\b', '/a"b', '/{x}', '/a|b', '?x', '#f'),
  fc.string({ unit: pick('ab/-%?# ~'), maxLength: 6 }).map((s) => `/${s}`),
);
const scheme = fc.constantFrom('http://', 'https://', 'http://', 'https://', 'HTTP://', 'ftp://', 'http:/', '');

/** URLs around every branch of rules/urls.ts. */
export const urlish = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(scheme, validHost, urlPort, urlPath).map((p) => p.join('')) },
  { weight: 2, arbitrary: fc.tuple(scheme, nearMissHost, urlPort, urlPath).map((p) => p.join('')) },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 500, max: 2060 })
      .map((n) => `http://h.example/${'p'.repeat(Math.max(0, n - 'http://h.example/'.length))}`),
  },
);

/** In-cluster Service URLs (jwksUri) and near misses. */
export const serviceUrlish = fc.oneof(
  fc
    .tuple(
      fc.constantFrom('http://', 'https://'),
      fc.constantFrom('keycloak-http.keycloak', 'jwks.auth', 'a.b'),
      fc.constantFrom('.svc.cluster.local', '.svc'),
      fc.constantFrom('', ':8443', ':80', ':65535'),
      fc.constantFrom('', '/', '/realms/x/protocol/openid-connect/certs', '/a/../b'),
    )
    .map((p) => p.join('')),
  fc
    .tuple(
      fc.constantFrom('http://', 'https://', 'ftp://'),
      fc.constantFrom('keycloak-http', 'svc', 'A', 'a_b', ''),
      fc.constantFrom('.keycloak', '.ns', '', '.NS'),
      fc.constantFrom('.svc.cluster.local', '.svc', '.svc.example', '.cluster.local', ''),
      urlPort,
      fc.constantFrom('', '/', '/realms/x/protocol/openid-connect/certs', '/a?b', '/a/../b'),
    )
    .map((p) => p.join('')),
  urlish,
);

/** Embedding profiles. */
export const profileish = fc.oneof(
  fc.constantFrom('bge-m3-1024-v1', 'bge_m3', 'BGE', 'a', 'a.b', '-a', 'a-', '.a', '', 'local-hash-1024-v1'),
  fc.string({ unit: pick('ab1.-_Z '), minLength: 0, maxLength: 8 }),
  fc.integer({ min: 62, max: 66 }).map((n) => 'p'.repeat(n)),
);

/** Model names. */
export const modelish = fc.oneof(
  fc.constantFrom('BAAI/bge-m3', 'bge m3', ' bge', 'bge ', 'a', '', 'a\tb', 'mödel', '😀'),
  fc.string({ unit: 'grapheme-ascii', minLength: 0, maxLength: 12 }),
  fc.integer({ min: 253, max: 258 }).map((n) => 'm'.repeat(n)),
);

/** DNS-1123 labels and near misses. */
export const labelish = fc.oneof(
  fc.constantFrom('knowledge', 'kagent', 'a', 'a-b', 'a.b', 'A', '-a', 'a-', '', 'a_b', '0'),
  fc.string({ unit: pick('ab0-.'), minLength: 0, maxLength: 6 }),
  fc.integer({ min: 62, max: 65 }).map((n) => 'l'.repeat(n)),
);

/** Label maps (pod selectors). */
export const labelMapish = fc.oneof(
  fc.constant({ 'app.kubernetes.io/name': 'agentgateway-proxy' }),
  fc.dictionary(
    fc.oneof(
      fc.constantFrom(
        'app',
        'app.kubernetes.io/name',
        'cnpg.io/cluster',
        'a/b/c',
        '/x',
        'x/',
        'Bad Key',
        '-x',
        'A_b.C',
      ),
      fc.string({ unit: pick('ab/.-_'), minLength: 0, maxLength: 5 }),
    ),
    fc.oneof(
      fc.constantFrom('platform-pg', '', 'a b', '-x', 'x-', 'A_b.C', 'v'.repeat(63), 'v'.repeat(64)),
      fc.string({ unit: pick('ab.-_ '), maxLength: 5 }),
    ),
    { maxKeys: 9 },
  ),
);

/** Ports and near misses. */
export const portish = fc.oneof(fc.integer({ min: -1, max: 70000 }), fc.constantFrom(1, 8080, 65535, 65536, 0, 1.5));

/** Free text with astral characters, near a character bound (code points, as kube counts). */
export function textNear(max: number) {
  return fc.oneof(
    fc.integer({ min: max - 2, max: max + 2 }).map((n) => 'a'.repeat(Math.max(0, n))),
    fc.integer({ min: Math.floor(max / 2) - 1, max: max + 1 }).map((n) => '😀'.repeat(Math.max(0, n))),
    fc.constantFrom('', 'x'),
  );
}

/** PostgreSQL URLs around every branch of rules/database.ts: credentials, queries, ports, hosts. */
export const databaseUrlish = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .tuple(
        fc.constantFrom('postgres://', 'postgresql://'),
        validHost,
        fc.oneof(
          fc.constant(''),
          fc.integer({ min: 1, max: 65535 }).map((n) => `:${n}`),
        ),
        fc.constantFrom('', '/knowledge', '/db_1', '/a%20b', '/'),
        fc.constantFrom(
          '',
          '?sslmode=verify-full&sslrootcert=/var/run/secrets/fgentic/pg-ca/ca.crt',
          '?application_name=fgentic',
          '?uselibpqcompat=true&sslmode=require',
          '?options=-c%20statement_timeout%3D5000',
        ),
      )
      .map((p) => p.join('')),
  },
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.constantFrom('postgres://', 'postgresql://', 'http://', 'POSTGRES://', 'postgres:/', ''),
        fc.oneof(validHost, nearMissHost),
        fc.constantFrom('', ':5432', ':0', ':65536', ':05432', ':'),
        fc.constantFrom('', '/knowledge', '/a b', '/a#f', '/é'),
        fc.constantFrom(
          '',
          '?password=x',
          '?user=x',
          '?sslpassword=x',
          '?sslmode=require&password=x',
          '?a=1&',
          '?=1',
          '?a b=1',
          '?a=1#f',
          '?a=%zz',
        ),
      )
      .map((p) => p.join('')),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(
        fc.constantFrom('postgres://', 'postgresql://'),
        fc.constantFrom('', '', 'u@', 'u:pw@'),
        validHost,
        fc.constantFrom('', ':5432'),
        fc.constantFrom('', '/knowledge'),
        fc.constantFrom('', '?password=x', '?user=x', '?sslpassword=x', '?sslmode=require&password=x', '?passwordx=1'),
      )
      .map((p) => p.join('')),
  },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 2030, max: 2060 })
      .map((n) => `postgres://h.example/${'d'.repeat(Math.max(0, n - 'postgres://h.example/'.length))}`),
  },
);
