/**
 * Test-only: a kubeconfig file that points a child process (the real CLI) at an API-server double as
 * one service account, the way a pod's in-cluster configuration points it at the real API server.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ApiServerDouble } from './apiserver.ts';
import { serviceAccountUser } from './rbac.ts';

/** Writes `<dir>/kubeconfig` for service account `namespace/name` and returns its path. */
export function writeKubeconfig(dir: string, api: ApiServerDouble, namespace: string, name: string): string {
  const path = join(dir, 'kubeconfig');
  writeFileSync(
    path,
    [
      'apiVersion: v1',
      'kind: Config',
      // client-node refuses plain HTTP unless TLS verification is explicitly off (the double has no TLS).
      `clusters: [{name: double, cluster: {server: "http://127.0.0.1:${api.port}", insecure-skip-tls-verify: true}}]`,
      `users: [{name: ${name}, user: {token: ${api.token(serviceAccountUser(namespace, name))}}}]`,
      `contexts: [{name: double, context: {cluster: double, user: ${name}}}]`,
      'current-context: double',
      '',
    ].join('\n'),
  );
  return path;
}
