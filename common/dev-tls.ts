/**
 * Self-signed loopback certificates for the local stack, tests and benchmarks (never for a
 * deployment, where cert-manager issues the webhook's certificate). Uses the openssl CLI because
 * node:crypto cannot create X.509 certificates.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export function hasOpenssl(): boolean {
  return spawnSync('openssl', ['version'], { stdio: 'ignore' }).status === 0;
}

/** Writes `tls.crt` and `tls.key` (P-256, SAN localhost and 127.0.0.1) into `dir`; throws on failure. */
export function makeSelfSignedCert(
  dir: string,
  options: { cn?: string; days?: number } = {},
): { cert: string; key: string } {
  mkdirSync(dir, { recursive: true });
  const r = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      join(dir, 'tls.key'),
      '-out',
      join(dir, 'tls.crt'),
      '-days',
      String(options.days ?? 1),
      '-subj',
      `/CN=${options.cn ?? 'localhost'}`,
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  if (r.status !== 0) throw new Error('openssl could not create a certificate');
  return {
    cert: readFileSync(join(dir, 'tls.crt'), 'utf8'),
    key: readFileSync(join(dir, 'tls.key'), 'utf8'),
  };
}
